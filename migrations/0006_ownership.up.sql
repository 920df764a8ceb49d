-- 0006: ownership (docs/rules.md#ownership, rules v3). The current
-- assignment of owned host slots, its history as validity intervals (so
-- "who owned gpu-07 at 10:00" is one query), and each consumer's owned,
-- used and lent-out slots with the layers a leaf's slots come from. A
-- pool whose plan names no ownership has no rows in the new tables, 0 in
-- the new counters and NULL sources.

CREATE TABLE ownership (
    pool     text   NOT NULL,
    consumer text   NOT NULL,
    host     text   NOT NULL,
    slots    bigint NOT NULL,
    PRIMARY KEY (pool, consumer, host)
);
COMMENT ON TABLE ownership IS 'Current ownership assignment: how many slots of each up host each consumer owns (section 5). A parent''s row includes the slots assigned from it to its children; the slots of a host no top-level consumer owns are the public pool.';
COMMENT ON COLUMN ownership.pool IS 'Pool of the assignment.';
COMMENT ON COLUMN ownership.consumer IS 'Consumer path (leaf or parent) owning the slots.';
COMMENT ON COLUMN ownership.host IS 'Host the owned slots are on.';
COMMENT ON COLUMN ownership.slots IS 'Number of slots of the host the consumer owns (never 0: a consumer owning nothing on a host has no row).';

CREATE TABLE ownership_history (
    pool            text        NOT NULL,
    consumer        text        NOT NULL,
    host            text        NOT NULL,
    slots           bigint      NOT NULL,
    valid_from_seq  bigint      NOT NULL,
    valid_from_time timestamptz NOT NULL,
    valid_to_seq    bigint      NULL,
    valid_to_time   timestamptz NULL,
    PRIMARY KEY (pool, consumer, host, valid_from_seq)
);
CREATE INDEX ownership_history_pool_host_from_idx ON ownership_history (pool, host, valid_from_seq);
COMMENT ON TABLE ownership_history IS 'Each consumer''s owned slots on each host over time, as validity intervals [valid_from, valid_to) opened and closed by the own decisions of plan and host events; owning nothing is no interval. The open intervals are the ownership table.';
COMMENT ON COLUMN ownership_history.pool IS 'Pool of the assignment.';
COMMENT ON COLUMN ownership_history.consumer IS 'Consumer path (leaf or parent) owning the slots.';
COMMENT ON COLUMN ownership_history.host IS 'Host the owned slots are on.';
COMMENT ON COLUMN ownership_history.slots IS 'Slots of the host the consumer owned during the interval.';
COMMENT ON COLUMN ownership_history.valid_from_seq IS 'Sequence of the event from which this amount holds (inclusive).';
COMMENT ON COLUMN ownership_history.valid_from_time IS 'Time of that event.';
COMMENT ON COLUMN ownership_history.valid_to_seq IS 'Sequence of the event that changed the amount again (exclusive); NULL while current.';
COMMENT ON COLUMN ownership_history.valid_to_time IS 'Time of that event; NULL while current.';

ALTER TABLE consumer_state
    ADD COLUMN owned    bigint NOT NULL DEFAULT 0,
    ADD COLUMN own_used bigint NOT NULL DEFAULT 0,
    ADD COLUMN lent_out bigint NOT NULL DEFAULT 0,
    ADD COLUMN sources  jsonb  NULL;
COMMENT ON COLUMN consumer_state.owned IS 'Slots assigned to the consumer by ownership (its rows in ownership, summed); 0 without ownership.';
COMMENT ON COLUMN consumer_state.own_used IS 'Of its owned slots, those held by its own subtree (the consumer itself, for a leaf).';
COMMENT ON COLUMN consumer_state.lent_out IS 'Of its owned slots, those held outside its subtree: idle owned slots lent out.';
COMMENT ON COLUMN consumer_state.sources IS 'For a leaf of a pool with ownership, where its slots come from: [{"pool": "own" | parent path (that parent''s private pool) | "/" (the public pool), "lender": owner of lent slots (absent for the pool''s own slots), "slots": n}, ...]; NULL for parents and in pools without ownership.';

COMMENT ON COLUMN decisions.kind IS 'grant, reclaim, release, trim; with ownership (rules v3) also lend (a grant on slots another consumer owns), return (an owner takes lent slots back) and own (a change of ownership, not of allocation).';
COMMENT ON COLUMN decisions.consumer IS 'Leaf that gains (grant, reclaim, lend, return) or loses (release, trim) the slots; for own, the consumer (leaf or parent) whose ownership changed.';
COMMENT ON COLUMN decisions.from_consumer IS 'For a reclaim, the leaf the slots are taken from; for a lend, the owner of the slots lent; for a return, the borrower giving them back; NULL otherwise.';
COMMENT ON COLUMN decisions.slots IS 'Number of slots moved; for own, the number of owned slots gained (own.assign) or lost (own.drop, own.trim).';
COMMENT ON COLUMN decisions.deadline IS 'When a grace period applies, the time by which the slots must be given up (a return: the event time plus the lender''s lend_grace); NULL otherwise.';
