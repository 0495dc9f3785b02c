{{/* The workload's name: nameOverride (default cloudgate-cloud-controller-manager). */}}
{{- define "cloudgate.name" -}}
{{- default "cloudgate-cloud-controller-manager" .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
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
{{- /* Merged, not replaced: every limits.shared key set under cloudgate (failureMode, maxMembers, weight, ...) is kept. */ -}}
{{- $shared := get $limits "shared" | default dict -}}
{{- $_ := set $shared "redis" $redis -}}
{{- $_ := set $shared "account" (required "redis.account is required with redis.address (the account whose quota the fleet shares)" .Values.redis.account) -}}
{{- $_ := set $limits "shared" $shared -}}
{{- $_ := set $c "limits" $limits -}}
{{- else if and (get $c "limits") (hasKey (get $c "limits") "shared") -}}
{{- fail "cloudgate.limits.shared is set but redis.address is empty: the fleet's budget lives in Redis; set redis.address and redis.account (docs/fleet.md), or remove cloudgate.limits.shared" -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}

{{/*
"true" when the upstream is the GCE provider (gce, or gce-batch: values-gce.yaml), which
needs RBAC of its own (templates/rbac.yaml); "" otherwise.
*/}}
{{- define "cloudgate.gce" -}}
{{- if has .Values.upstream.name (list "gce" "gce-batch") }}true{{ end -}}
{{- end -}}

{{/*
The ServiceAccounts (kube client names) that act with --use-service-account-credentials=true:
the CCM's controllers (cloud-node and cloud-node-lifecycle share node-controller), the AWS
provider's tagging controller and the AWS provider itself (its Events), and cloudgate (its
fleet Events: provider.EventsClientName); behind GCE also the GCE provider's own client
(Cloud.Initialize: cloud-provider, its Events and the ingress-uid ConfigMap).
*/}}
{{- define "cloudgate.controllerAccounts" -}}
node-controller service-controller route-controller tagging-controller aws-cloud-provider cloudgate
{{- if include "cloudgate.gce" . }} cloud-provider{{ end -}}
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


{{/*
The stock AWS chart's (aws-cloud-controller-manager) value keys this chart does not take,
refused at render time with what to do instead; values.schema.json lets exactly these
through to here so that the message is this one. Its other keys work here as there
(hostNetworking is translated to hostNetwork). Stock args that would replace cloudgate's
--cloud-provider or --cloud-config are refused too: appended last they would win, and the
CCM would read cloudgate.yaml as the AWS provider's config and exit.
*/}}
{{- define "cloudgate.refuseStockValues" -}}
{{- $rbacNames := "the chart names its RBAC objects after nameOverride (cloudgate:<name>...), apart from the stock release's; remove it" -}}
{{- $refused := dict
  "serviceAccountName" "cloudgate's ServiceAccount is serviceAccount.name (default cloudgate-cloud-controller-manager); do not reuse the stock release's: two releases cannot own one ServiceAccount, and uninstalling one would delete it under the other; remove it"
  "clusterRoleName" $rbacNames
  "roleBindingName" $rbacNames
  "roleName" $rbacNames
  "clusterRoleRules" "cloudgate's RBAC is the least-privilege set its e2e tests run with (templates/rbac.yaml) and is not configurable; remove it"
  "securityContext" "the chart sets a hardened container security context (non-root 65532, read-only root filesystem, no capabilities) and does not take one; remove it"
  "podSecurityContext" "the chart sets the Pod's security context (runAsNonRoot, 65532, RuntimeDefault seccomp) and does not take one; remove it" -}}
{{- range $key, $why := $refused -}}
{{- if hasKey $.Values $key -}}
{{- fail (printf "%s is a value of the stock aws-cloud-controller-manager chart: %s (docs/install-aws.md)" $key $why) -}}
{{- end -}}
{{- end -}}
{{- range .Values.args -}}
{{- if regexMatch "^--?cloud-(provider|config)([= ]|$)" (toString .) -}}
{{- fail (printf "args: %q: the chart sets --cloud-provider=cloudgate and --cloud-config (cloudgate.yaml); the provider cloudgate runs is upstream.name (aws-batch or aws) with upstream.cloudConfig as its config. Remove it: appended last it would win, and the CCM would exit (docs/install-aws.md)" (toString .)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The GCE image runs nodeipam in --controllers=* (as cloud-provider-gcp's CCM), and it exits at
start-up without --allocate-node-cidrs: refused here with what to set instead.
*/}}
{{- define "cloudgate.checkNodeIPAM" -}}
{{- if include "cloudgate.gce" . -}}
{{- $c := splitList "," (toString .Values.controllers) -}}
{{- $off := or (has "-nodeipam" $c) (has "-node-ipam-controller" $c) -}}
{{- $on := or (has "nodeipam" $c) (has "node-ipam-controller" $c) (and (has "*" $c) (not $off)) -}}
{{- if and $on (not .Values.allocateNodeCIDRs) -}}
{{- fail (printf "controllers: %q runs the GCE CCM's nodeipam, which needs allocateNodeCIDRs: true and clusterCIDR (the GCE CCM exits without them); where kube-controller-manager allocates Pod CIDRs, set allocateNodeCIDRs: false and controllers: \"*,-nodeipam\" (docs/gce.md)" (toString .Values.controllers)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
