ALTER TABLE projector_offsets
    DROP CONSTRAINT IF EXISTS projector_offsets_partition_check,
    DROP COLUMN IF EXISTS owner,
    DROP COLUMN IF EXISTS partitions,
    DROP COLUMN IF EXISTS partition;
