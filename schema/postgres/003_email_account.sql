-- The accounts a firm or a venue issued to an address, by that address
-- (lower-cased) and the account's id: the read model a verified user's
-- accounts are found in (projections.CollEmailAccount). The fold writes it for
-- every account opened from now on; this fills it for the accounts a store
-- folded before it existed.
INSERT INTO docs (coll, key, doc)
SELECT 'email_account', lower(doc->>'email') || '/' || key, to_json(key)
FROM docs
WHERE coll = 'account' AND coalesce(doc->>'email', '') <> ''
ON CONFLICT (coll, key) DO NOTHING;
