// Package observability holds ready-to-run files for watching gorap: a
// Prometheus scrape configuration (prometheus.yml), alert rules
// (rules.yml) and a Grafana dashboard (grafana-dashboard.json), described
// in docs/observability.md. It has no Go code; its test checks that the
// rules and the dashboard's queries parse and name only metrics gorap
// registers.
package observability
