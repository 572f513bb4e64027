"""Per-tenant GPU metrics: what is collected, how it is labelled, the chargeback rules and the
dashboards (docs/metrics.md). Pure builders, except ``deploy``, which registers them."""
