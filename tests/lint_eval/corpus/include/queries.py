"""Shared SQL for the marketing pipelines."""

CAMPAIGN_TABLE = "marketing.campaign_touches"

LOAD_TOUCHES = f"""
DELETE FROM {CAMPAIGN_TABLE} WHERE touched_at::date = '{{{{ ds }}}}';
INSERT INTO {CAMPAIGN_TABLE} (touch_id, campaign_id, customer_id, touched_at)
SELECT gen_random_uuid(), campaign_id, customer_id, touched_at
FROM landing.email_events
WHERE touched_at::date = '{{{{ ds }}}}';
"""

REFRESH_CAMPAIGNS = """
INSERT INTO marketing.campaigns (campaign_id, name, channel)
SELECT campaign_id, name, channel FROM landing.campaigns
ON CONFLICT (campaign_id) DO UPDATE SET name = EXCLUDED.name, channel = EXCLUDED.channel
"""
