-- The projections store: one ordered document table and the projections'
-- checkpoints. Keys compare byte-wise (COLLATE "C"), the order of Go strings,
-- so keyset reads on the primary key list documents exactly as the memory
-- store does. Documents are kept as json (not jsonb): the text is stored as
-- written, so decimal strings come back exactly.
CREATE TABLE docs (
    coll   text COLLATE "C" NOT NULL,
    key    text COLLATE "C" NOT NULL,
    doc    json NOT NULL,
    -- exported fields of the top-level struct tagged json:"-", by Go field name
    hidden json,
    PRIMARY KEY (coll, key)
);

-- One row per projection: the last log sequence folded into docs, written in
-- the same transaction as the documents it covers.
CREATE TABLE checkpoints (
    name text PRIMARY KEY,
    seq  bigint NOT NULL CHECK (seq >= 0)
);
