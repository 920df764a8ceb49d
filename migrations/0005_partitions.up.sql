-- Partitioned projectors (issue 11): pools are hashed into N partitions,
-- each folded by one projector instance at a time; each partition keeps
-- its own row here, committed with the rows it wrote, as before.
ALTER TABLE projector_offsets
    ADD COLUMN partition  int,
    ADD COLUMN partitions int,
    ADD COLUMN owner      text NOT NULL DEFAULT '',
    ADD CONSTRAINT projector_offsets_partition_check
        CHECK ((partition IS NULL AND partitions IS NULL)
            OR (partitions >= 1 AND partition >= 0 AND partition < partitions));
COMMENT ON COLUMN projector_offsets.partition IS 'Partition (0-based) this row is the offset of; NULL for an unpartitioned projector, which folds every pool.';
COMMENT ON COLUMN projector_offsets.partitions IS 'How many partitions the pools are hashed into (FNV-1a of the pool name, modulo this); NULL when unpartitioned.';
COMMENT ON COLUMN projector_offsets.owner IS 'Instance (--instance, default host:pid) that committed this offset last: which projector folds the partition.';
