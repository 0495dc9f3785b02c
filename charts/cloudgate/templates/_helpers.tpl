{{/* The workload's name: nameOverride (default cloud-controller-manager). */}}
{{- define "cloudgate.name" -}}
{{- default "cloud-controller-manager" .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cloudgate.labels" -}}
app.kubernetes.io/name: {{ include "cloudgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "cloudgate.selectorLabels" -}}
k8s-app: {{ include "cloudgate.name" . }}
{{- end -}}

{{/* The Redis password Secret's name (redis.existingSecret or the chart's own). */}}
{{- define "cloudgate.redisSecret" -}}
{{- default (printf "%s-redis" (include "cloudgate.name" .)) .Values.redis.existingSecret -}}
{{- end -}}

{{/*
cloudgate.yaml: the values' cloudgate sections, upstream from upstream.name, and
limits.shared from redis.* when redis.address is set.
*/}}
{{- define "cloudgate.config" -}}
{{- $c := deepCopy (.Values.cloudgate | default dict) -}}
{{- $_ := set $c "upstream" (dict "name" .Values.upstream.name "configFile" "/etc/cloudgate-upstream/cloud.conf") -}}
{{- if .Values.redis.address -}}
{{- $redis := dict "address" .Values.redis.address -}}
{{- if or .Values.redis.password .Values.redis.existingSecret }}{{ $_ := set $redis "passwordFile" "/etc/cloudgate-redis/password" }}{{ end -}}
{{- if .Values.redis.username }}{{ $_ := set $redis "username" .Values.redis.username }}{{ end -}}
{{- if .Values.redis.tls.enabled -}}
{{- $tls := dict "enabled" true -}}
{{- if .Values.redis.tls.serverName }}{{ $_ := set $tls "serverName" .Values.redis.tls.serverName }}{{ end -}}
{{- $_ := set $redis "tls" $tls -}}
{{- end -}}
{{- $limits := get $c "limits" | default dict -}}
{{- $_ := set $limits "shared" (dict "redis" $redis "account" (required "redis.account is required with redis.address (the account whose quota the fleet shares)" .Values.redis.account)) -}}
{{- $_ := set $c "limits" $limits -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}

{{/*
The ServiceAccounts (kube client names) that act with --use-service-account-credentials=true:
the CCM's controllers (cloud-node and cloud-node-lifecycle share node-controller), the AWS
provider's tagging controller and the AWS provider itself (its Events), and cloudgate (its
fleet Events: provider.EventsClientName).
*/}}
{{- define "cloudgate.controllerAccounts" -}}
node-controller service-controller route-controller tagging-controller aws-cloud-provider cloudgate
{{- end -}}

{{/* --tags: tagging.tags as key=value,key=value in key order. */}}
{{- define "cloudgate.tags" -}}
{{- $pairs := list -}}
{{- range $k, $v := .Values.tagging.tags -}}
{{- if or (contains "," (toString $k)) (contains "=" (toString $k)) (contains "," (toString $v)) -}}
{{- fail (printf "tagging.tags: %q: keys must not contain \",\" or \"=\", values not \",\" (--tags is key=value,key=value)" $k) -}}
{{- end -}}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}
