-- One point per euro spent on the run's day.
UPDATE crm.loyalty_accounts a
SET points = points + d.earned
FROM (
    SELECT customer_id, FLOOR(SUM(amount))::int AS earned
    FROM core.orders
    WHERE order_date = '{{ ds }}'
    GROUP BY customer_id
) d
WHERE a.customer_id = d.customer_id;
