-- 0001: the projection schema. Every table is keyed by pool; the
-- projector writes it, reporting tools read it. Sequences are JetStream
-- stream sequences of the LEDGER stream.

CREATE TABLE events (
    pool      text        NOT NULL,
    seq       bigint      NOT NULL,
    id        text        NOT NULL,
    type      text        NOT NULL,
    v         int         NOT NULL,
    time      timestamptz NOT NULL,
    producer  text        NOT NULL,
    data      jsonb       NOT NULL,
    refused   text        NULL,
    prev_hash bytea       NOT NULL,
    hash      bytea       NOT NULL,
    PRIMARY KEY (pool, seq)
);
CREATE INDEX events_pool_time_idx ON events (pool, time);
COMMENT ON TABLE events IS 'A copy of the event log (JetStream stream LEDGER), one row per event, in sequence order per pool.';
COMMENT ON COLUMN events.pool IS 'Pool the event belongs to (subject ledger.<pool>.<type>).';
COMMENT ON COLUMN events.seq IS 'Stream sequence of the event: its offset in the log.';
COMMENT ON COLUMN events.id IS 'Producer-chosen event id (Nats-Msg-Id), unique per producer retry window.';
COMMENT ON COLUMN events.type IS 'Event type: demand, release, plan, host_up or host_down.';
COMMENT ON COLUMN events.v IS 'Schema version of the event payload.';
COMMENT ON COLUMN events.time IS 'Time stamped by the ledger when it appended the event.';
COMMENT ON COLUMN events.producer IS 'Who sent the event.';
COMMENT ON COLUMN events.data IS 'The event payload (the fields of scenarios.md) as JSON.';
COMMENT ON COLUMN events.refused IS 'NULL when the fold applied the event; otherwise why the fold refused it (state unchanged).';
COMMENT ON COLUMN events.prev_hash IS 'Chained hash after the previous event of the pool (the genesis value for its first event).';
COMMENT ON COLUMN events.hash IS 'State hash after this event, chained to prev_hash.';

CREATE TABLE consumers (
    pool     text    NOT NULL,
    path     text    NOT NULL,
    parent   text    NOT NULL,
    leaf     boolean NOT NULL,
    share    bigint  NOT NULL,
    priority bigint  NOT NULL,
    max      text    NULL,
    PRIMARY KEY (pool, path)
);
COMMENT ON TABLE consumers IS 'The current plan of each pool: one row per consumer of the hierarchy.';
COMMENT ON COLUMN consumers.pool IS 'Pool of the plan.';
COMMENT ON COLUMN consumers.path IS 'Absolute /-separated consumer path.';
COMMENT ON COLUMN consumers.parent IS 'Path of the parent consumer (the root is /).';
COMMENT ON COLUMN consumers.leaf IS 'True when the consumer has no children and so can hold slots.';
COMMENT ON COLUMN consumers.share IS 'Share weight among its siblings.';
COMMENT ON COLUMN consumers.priority IS 'Priority among its siblings.';
COMMENT ON COLUMN consumers.max IS 'Cap as written in the plan: a slot count or N%; NULL for no cap.';

CREATE TABLE hosts (
    pool      text    NOT NULL,
    name      text    NOT NULL,
    grp       text    NOT NULL,
    slots     bigint  NOT NULL,
    up        boolean NOT NULL,
    allocated bigint  NOT NULL,
    PRIMARY KEY (pool, name)
);
COMMENT ON TABLE hosts IS 'Hosts of each pool and how many of their slots are allocated.';
COMMENT ON COLUMN hosts.pool IS 'Pool of the host.';
COMMENT ON COLUMN hosts.name IS 'Host name.';
COMMENT ON COLUMN hosts.grp IS 'Host group (default when not given).';
COMMENT ON COLUMN hosts.slots IS 'Slots the host offers.';
COMMENT ON COLUMN hosts.up IS 'False after host_down until the next host_up.';
COMMENT ON COLUMN hosts.allocated IS 'Slots of the host currently allocated to consumers.';

CREATE TABLE allocations (
    pool     text   NOT NULL,
    consumer text   NOT NULL,
    host     text   NOT NULL,
    slots    bigint NOT NULL,
    PRIMARY KEY (pool, consumer, host)
);
COMMENT ON TABLE allocations IS 'Current allocations: how many slots each leaf holds on each host.';
COMMENT ON COLUMN allocations.pool IS 'Pool of the allocation.';
COMMENT ON COLUMN allocations.consumer IS 'Leaf consumer path holding the slots.';
COMMENT ON COLUMN allocations.host IS 'Host the slots are on.';
COMMENT ON COLUMN allocations.slots IS 'Number of slots held.';

CREATE TABLE consumer_state (
    pool          text    NOT NULL,
    consumer      text    NOT NULL,
    leaf          boolean NOT NULL,
    demand        bigint  NOT NULL,
    effective     bigint  NOT NULL,
    planned       bigint  NOT NULL,
    target        bigint  NOT NULL,
    allocated     bigint  NOT NULL,
    borrowed      bigint  NOT NULL,
    waiting_since bigint  NULL,
    updated_seq   bigint  NOT NULL,
    PRIMARY KEY (pool, consumer)
);
COMMENT ON TABLE consumer_state IS 'Reportable state of each consumer after the last applied event; for a parent, demand and allocated are sums over its leaves.';
COMMENT ON COLUMN consumer_state.pool IS 'Pool of the consumer.';
COMMENT ON COLUMN consumer_state.consumer IS 'Consumer path.';
COMMENT ON COLUMN consumer_state.leaf IS 'True for a leaf.';
COMMENT ON COLUMN consumer_state.demand IS 'Slots asked for (leaf) or the sum of its leaves'' demand (parent).';
COMMENT ON COLUMN consumer_state.effective IS 'Effective demand E: demand capped by max.';
COMMENT ON COLUMN consumer_state.planned IS 'Planned (guaranteed) share G of the pool capacity.';
COMMENT ON COLUMN consumer_state.target IS 'Target allocation computed by the rules.';
COMMENT ON COLUMN consumer_state.allocated IS 'Slots held (leaf) or held by its leaves (parent).';
COMMENT ON COLUMN consumer_state.borrowed IS 'Slots held above the planned share.';
COMMENT ON COLUMN consumer_state.waiting_since IS 'Sequence of the event since which unmet demand has been positive; NULL when none is unmet.';
COMMENT ON COLUMN consumer_state.updated_seq IS 'Sequence of the last event that changed this row.';

CREATE TABLE decisions (
    pool          text        NOT NULL,
    event_seq     bigint      NOT NULL,
    ordinal       int         NOT NULL,
    kind          text        NOT NULL,
    consumer      text        NOT NULL,
    from_consumer text        NULL,
    host          text        NOT NULL,
    slots         bigint      NOT NULL,
    rule          text        NOT NULL,
    deadline      timestamptz NULL,
    PRIMARY KEY (pool, event_seq, ordinal)
);
CREATE INDEX decisions_pool_consumer_seq_idx ON decisions (pool, consumer, event_seq);
CREATE INDEX decisions_pool_kind_seq_idx ON decisions (pool, kind, event_seq);
COMMENT ON TABLE decisions IS 'Every allocation change, in the order the fold made it: the why of each slot.';
COMMENT ON COLUMN decisions.pool IS 'Pool of the decision.';
COMMENT ON COLUMN decisions.event_seq IS 'Sequence of the event that caused the decision.';
COMMENT ON COLUMN decisions.ordinal IS 'Position of the decision among those of its event, in the order the fold made them.';
COMMENT ON COLUMN decisions.kind IS 'grant, reclaim, release, trim (lend, return, own reserved).';
COMMENT ON COLUMN decisions.consumer IS 'Leaf that gains (grant, reclaim) or loses (release, trim) the slots.';
COMMENT ON COLUMN decisions.from_consumer IS 'For a reclaim, the leaf the slots are taken from; NULL otherwise.';
COMMENT ON COLUMN decisions.host IS 'Host of the slots.';
COMMENT ON COLUMN decisions.slots IS 'Number of slots moved.';
COMMENT ON COLUMN decisions.rule IS 'Stable identifier of the allocation rule that caused the decision (e.g. share_ratio.grant).';
COMMENT ON COLUMN decisions.deadline IS 'When a grace period applies, the time by which the slots must be given up; NULL otherwise.';

CREATE TABLE allocation_history (
    pool            text        NOT NULL,
    consumer        text        NOT NULL,
    slots           bigint      NOT NULL,
    valid_from_seq  bigint      NOT NULL,
    valid_from_time timestamptz NOT NULL,
    valid_to_seq    bigint      NULL,
    valid_to_time   timestamptz NULL,
    PRIMARY KEY (pool, consumer, valid_from_seq)
);
CREATE INDEX allocation_history_pool_from_seq_idx ON allocation_history (pool, valid_from_seq);
COMMENT ON TABLE allocation_history IS 'Each leaf consumer''s total slots over time, as validity intervals [valid_from, valid_to); a leaf holding nothing has no open interval. Parents are the sums of their leaves: allocations_as_of adds them up.';
COMMENT ON COLUMN allocation_history.pool IS 'Pool of the consumer.';
COMMENT ON COLUMN allocation_history.consumer IS 'Leaf consumer path.';
COMMENT ON COLUMN allocation_history.slots IS 'Slots held (over all hosts) during the interval.';
COMMENT ON COLUMN allocation_history.valid_from_seq IS 'Sequence of the event from which this amount holds (inclusive).';
COMMENT ON COLUMN allocation_history.valid_from_time IS 'Time of that event.';
COMMENT ON COLUMN allocation_history.valid_to_seq IS 'Sequence of the event that changed the amount again (exclusive); NULL while current.';
COMMENT ON COLUMN allocation_history.valid_to_time IS 'Time of that event; NULL while current.';

CREATE TABLE checkpoints (
    pool       text        NOT NULL PRIMARY KEY,
    last_seq   bigint      NOT NULL,
    state_hash bytea       NOT NULL,
    chain_hash bytea       NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE checkpoints IS 'Per pool, the last event the projection applied and the hashes after it.';
COMMENT ON COLUMN checkpoints.pool IS 'Pool.';
COMMENT ON COLUMN checkpoints.last_seq IS 'Sequence of the last applied event of the pool.';
COMMENT ON COLUMN checkpoints.state_hash IS 'Hash of the pool state after that event.';
COMMENT ON COLUMN checkpoints.chain_hash IS 'Chained hash after that event (events.hash of last_seq).';
COMMENT ON COLUMN checkpoints.updated_at IS 'When the projector committed this checkpoint.';

CREATE TABLE projector_offsets (
    name       text        NOT NULL PRIMARY KEY,
    stream_seq bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE projector_offsets IS 'Resume point of each durable projector in the stream, committed with the rows it wrote.';
COMMENT ON COLUMN projector_offsets.name IS 'Projector (durable consumer) name.';
COMMENT ON COLUMN projector_offsets.stream_seq IS 'Last stream sequence applied; the projector resumes after it.';
COMMENT ON COLUMN projector_offsets.updated_at IS 'When the offset was committed.';

CREATE TABLE snapshots (
    pool       text   NOT NULL,
    seq        bigint NOT NULL,
    format     int    NOT NULL,
    state      bytea  NOT NULL,
    state_hash bytea  NOT NULL,
    PRIMARY KEY (pool, seq)
);
COMMENT ON TABLE snapshots IS 'Serialised pool states, so replay can start from the nearest snapshot at or before an offset.';
COMMENT ON COLUMN snapshots.pool IS 'Pool.';
COMMENT ON COLUMN snapshots.seq IS 'Sequence of the last event folded into the state.';
COMMENT ON COLUMN snapshots.format IS 'Serialisation format version of state.';
COMMENT ON COLUMN snapshots.state IS 'The serialised state.';
COMMENT ON COLUMN snapshots.state_hash IS 'State hash of the state, as recorded for seq.';

CREATE FUNCTION consumer_and_ancestors(p_path text)
RETURNS SETOF text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT array_to_string((string_to_array(p_path, '/'))[1:n], '/')
    FROM generate_series(2, cardinality(string_to_array(p_path, '/'))) AS n
$$;
COMMENT ON FUNCTION consumer_and_ancestors(text) IS 'A consumer path and every ancestor path: /a/b gives /a and /a/b.';

CREATE FUNCTION allocations_as_of(p_pool text, p_seq bigint)
RETURNS TABLE (consumer text, slots bigint)
LANGUAGE sql STABLE
AS $$
    SELECT a.path, sum(h.slots)::bigint
    FROM allocation_history h
    CROSS JOIN LATERAL consumer_and_ancestors(h.consumer) AS a(path)
    WHERE h.pool = p_pool
      AND h.valid_from_seq <= p_seq
      AND (h.valid_to_seq IS NULL OR h.valid_to_seq > p_seq)
    GROUP BY a.path
    ORDER BY a.path
$$;
COMMENT ON FUNCTION allocations_as_of(text, bigint) IS 'Slots of every consumer (leaves and parents) of pool p_pool holding any, just after the event with sequence p_seq was applied. A consumer not listed held none.';

CREATE FUNCTION allocations_as_of_time(p_pool text, p_time timestamptz)
RETURNS TABLE (consumer text, slots bigint)
LANGUAGE sql STABLE
AS $$
    -- The state at a time is the state after the pool's last event at or
    -- before it.
    SELECT * FROM allocations_as_of(p_pool,
        (SELECT coalesce(max(e.seq), 0) FROM events e WHERE e.pool = p_pool AND e.time <= p_time))
$$;
COMMENT ON FUNCTION allocations_as_of_time(text, timestamptz) IS 'Slots of every consumer (leaves and parents) of pool p_pool holding any at time p_time (by event times). A consumer not listed held none.';
