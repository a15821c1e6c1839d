CREATE TABLE IF NOT EXISTS dw.dim_customer (
    customer_id BIGINT PRIMARY KEY,
    email       TEXT NOT NULL,
    country     TEXT,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
