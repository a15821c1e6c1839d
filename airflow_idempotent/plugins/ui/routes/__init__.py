"""The app's routers: the JSON API (`api`: history and attempts; `backfills`; `rerun`: the rerun
preview) and the pages (`pages`, and `rerun.pages`)."""
