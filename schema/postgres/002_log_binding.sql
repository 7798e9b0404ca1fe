-- The commit log the read models are folded from, by its id (the id of the
-- log's identity commit), kept with the checkpoint. NULL: bound to no log yet,
-- a new store or one from before logs had ids; it binds at the next start.
ALTER TABLE checkpoints ADD COLUMN log_id text;
