// Package dashboards holds cloudgate's Grafana dashboard (cloudgate.json) and
// Prometheus alerting rules (alerts.yaml), embedded here so tools can ship
// them; docs/monitoring.md describes every panel and alert. Their tests live
// in the bench module (bench/dashboards), which may depend on the Prometheus
// server's PromQL parser and on simcloud: they check that every expression
// parses and names only metrics package metrics exports, run `promtool check
// rules` and `promtool test rules`, and scrape a short load run with a real
// Prometheus to query every panel.
package dashboards

import _ "embed"

// Dashboard is the Grafana dashboard JSON (cloudgate.json). It takes the
// data source as the template variable "datasource" and the provider label as
// "provider".
//
//go:embed cloudgate.json
var Dashboard []byte

// Alerts is the Prometheus rules file (alerts.yaml).
//
//go:embed alerts.yaml
var Alerts []byte
