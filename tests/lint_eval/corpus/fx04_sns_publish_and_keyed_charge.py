"""Subscription renewals: charge with an idempotency key, then announce on SNS."""

from __future__ import annotations

import boto3
import pendulum
import stripe
from airflow.sdk import dag, task


@dag(
    schedule="@daily",
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 2},
)
def subscription_renewals():
    @task
    def charge_renewals(ds=None) -> list[str]:
        charged = []
        for customer in ["cus_123", "cus_456"]:
            stripe.PaymentIntent.create(
                customer=customer,
                amount=999,
                currency="eur",
                idempotency_key=f"renewal-{customer}-{ds}",
            )
            charged.append(customer)
        return charged

    @task
    def announce(charged: list[str]) -> None:
        boto3.client("sns").publish(
            TopicArn="arn:aws:sns:eu-west-1:123456789012:renewals",
            Message=f"{len(charged)} renewals charged",
        )

    announce(charge_renewals())


subscription_renewals()
