ALTER TABLE consumer_state
    DROP COLUMN IF EXISTS sources,
    DROP COLUMN IF EXISTS lent_out,
    DROP COLUMN IF EXISTS own_used,
    DROP COLUMN IF EXISTS owned;
DROP TABLE IF EXISTS ownership_history;
DROP TABLE IF EXISTS ownership;
COMMENT ON COLUMN decisions.kind IS 'grant, reclaim, release, trim (lend, return, own reserved).';
COMMENT ON COLUMN decisions.consumer IS 'Leaf that gains (grant, reclaim) or loses (release, trim) the slots.';
COMMENT ON COLUMN decisions.from_consumer IS 'For a reclaim, the leaf the slots are taken from; NULL otherwise.';
COMMENT ON COLUMN decisions.slots IS 'Number of slots moved.';
COMMENT ON COLUMN decisions.deadline IS 'When a grace period applies, the time by which the slots must be given up; NULL otherwise.';
