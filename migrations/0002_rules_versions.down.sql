ALTER TABLE events DROP COLUMN refusal_detail;
ALTER TABLE checkpoints DROP COLUMN rules_since, DROP COLUMN rules;
