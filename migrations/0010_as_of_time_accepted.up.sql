-- The state at a time is the state after the pool's last event at or
-- before it that the ledger took (decision 523). A refused event
-- (unauthenticated: published around the ledger, with any time in its
-- body; a duplicate copy of a stored event) changed nothing, and its
-- time is whatever its publisher wrote: counted, one dated 2000-01-01
-- made every time of the pool answer its state now. The events the
-- ledger takes are stamped in order within a pool (never earlier than
-- the pool's previous event), so the last taken at or before a time is
-- the state then. CREATE OR REPLACE keeps the grants of 0008_roles.
CREATE OR REPLACE FUNCTION allocations_as_of_time(p_pool text, p_time timestamptz)
RETURNS TABLE (consumer text, slots bigint)
LANGUAGE sql STABLE
AS $$
    SELECT * FROM allocations_as_of(p_pool,
        (SELECT coalesce(max(e.seq), 0) FROM events e
         WHERE e.pool = p_pool AND e.time <= p_time AND e.refused IS NULL))
$$;
COMMENT ON FUNCTION allocations_as_of_time(text, timestamptz) IS 'Slots of every consumer (leaves and parents) of pool p_pool holding any at time p_time: just after the pool''s last event the ledger took (not refused) stamped at or before p_time. A consumer not listed held none.';
