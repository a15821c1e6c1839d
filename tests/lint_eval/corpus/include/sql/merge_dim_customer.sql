INSERT INTO dw.dim_customer (customer_id, email, country)
SELECT customer_id, email, country
FROM staging.customers
WHERE extracted_for = '{{ ds }}'
ON CONFLICT (customer_id) DO UPDATE
SET email = EXCLUDED.email,
    country = EXCLUDED.country;
