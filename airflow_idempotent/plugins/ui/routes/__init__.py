"""The app's routers: the JSON API (`api`: history and attempts; `backfills`) and the pages."""
