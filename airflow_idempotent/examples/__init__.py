"""Reference scenarios (data, schema and test oracles) for the demo, the example DAGs and the tests."""
