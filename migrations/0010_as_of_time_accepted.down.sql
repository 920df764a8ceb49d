CREATE OR REPLACE FUNCTION allocations_as_of_time(p_pool text, p_time timestamptz)
RETURNS TABLE (consumer text, slots bigint)
LANGUAGE sql STABLE
AS $$
    -- The state at a time is the state after the pool's last event at or
    -- before it.
    SELECT * FROM allocations_as_of(p_pool,
        (SELECT coalesce(max(e.seq), 0) FROM events e WHERE e.pool = p_pool AND e.time <= p_time))
$$;
COMMENT ON FUNCTION allocations_as_of_time(text, timestamptz) IS 'Slots of every consumer (leaves and parents) of pool p_pool holding any at time p_time (by event times). A consumer not listed held none.';
