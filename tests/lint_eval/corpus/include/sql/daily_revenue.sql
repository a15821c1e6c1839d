-- Revenue of the last 24 hours, per product.
INSERT INTO mart.daily_revenue (product_id, revenue, computed_for)
SELECT product_id, SUM(amount), CURRENT_DATE
FROM core.order_lines
WHERE created_at >= NOW() - INTERVAL '24 hours'
GROUP BY product_id;
