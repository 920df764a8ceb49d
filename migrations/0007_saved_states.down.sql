DROP TABLE IF EXISTS saved_states;
