-- Orders of the run's day, copied from the landing schema.
INSERT INTO analytics.orders (order_id, customer_id, amount, order_date)
SELECT order_id, customer_id, amount, order_date
FROM landing.orders
WHERE order_date = '{{ ds }}';
