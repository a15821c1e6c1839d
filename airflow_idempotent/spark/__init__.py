"""Spark's writes by table format: Delta Lake tables commit a window themselves (`delta`), Iceberg
tables in one snapshot of their own (`iceberg`), plain parquet tables go through the crash-safe
partition switch (`airflow_idempotent.spark.switch`).

`writes` picks the path from the catalog's answer for the target (its provider), so DAGs do not
change shape: the same PartitionOverwriteOperator and MergeOperator with a `spark_connect` conn.
"""
