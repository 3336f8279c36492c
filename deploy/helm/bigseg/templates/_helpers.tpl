{{/* Names and labels. */}}

{{- define "bigseg.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "bigseg.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "bigseg.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- /* The scanner's pods (.scanner) have a name of their own: no Service, PodDisruptionBudget
or autoscaler of the servers counts them, and neither Deployment's selector overlaps the
other's. */ -}}
{{- define "bigseg.selectorLabels" -}}
app.kubernetes.io/name: {{ include "bigseg.name" . }}{{ if .scanner }}-inventory-scanner{{ end }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "bigseg.labels" -}}
helm.sh/chart: {{ include "bigseg.chart" . }}
{{ include "bigseg.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ if .scanner }}inventory-scanner{{ else }}server{{ end }}
app.kubernetes.io/part-of: bigseg
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "bigseg.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "bigseg.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "bigseg.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
bigseg.seconds: a Go duration ("5s", "1m30s", "500ms") in seconds, as a float. Go's own
syntax, checked whole: anything else fails the render, naming the value.
Call with (list "shutdown.delay" .Values.shutdown.delay).
*/}}
{{- define "bigseg.seconds" -}}
{{- $name := index . 0 }}
{{- $d := index . 1 }}
{{- if not (kindIs "string" $d) }}
{{- fail (printf "%s: want a Go duration such as 5s or 1m30s, in quotes, not %v" $name $d) }}
{{- end }}
{{- $units := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 }}
{{- $parts := regexFindAll "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|ms|s|m|h)" $d -1 }}
{{- if eq $d "0" }}
{{- 0.0 }}
{{- else if or (not $parts) (ne (join "" $parts) $d) }}
{{- fail (printf "%s: %q is not a Go duration (such as 5s, 500ms or 1m30s)" $name $d) }}
{{- else }}
{{- $total := 0.0 }}
{{- range $parts }}
{{- $num := regexFind "^([0-9]+(\\.[0-9]*)?|\\.[0-9]+)" . }}
{{- $total = addf $total (mulf (float64 $num) (get $units (trimPrefix $num .))) }}
{{- end }}
{{- $total }}
{{- end }}
{{- end }}

{{/*
bigseg.bytes: a Kubernetes memory quantity ("256Mi", "1.5Gi", "512M", "1e9", 268435456) in
bytes, as a float. Call with (list "resources.limits.memory" $quantity).
*/}}
{{- define "bigseg.bytes" -}}
{{- $name := index . 0 }}
{{- $q := index . 1 }}
{{- if or (kindIs "float64" $q) (kindIs "int64" $q) (kindIs "int" $q) }}
{{- float64 $q }}
{{- else }}
{{- $q = toString $q }}
{{- $m := regexFind "^[0-9]+(\\.[0-9]+)?" $q }}
{{- $suffix := trimPrefix $m $q }}
{{- $mult := dict "" 1.0 "m" 0.001 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 "P" 1000000000000000.0 "E" 1000000000000000000.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 }}
{{- if not $m }}
{{- fail (printf "%s: %q is not a memory quantity such as 256Mi or 1Gi" $name $q) }}
{{- else if hasKey $mult $suffix }}
{{- mulf (float64 $m) (get $mult $suffix) }}
{{- else if regexMatch "^[eE][+-]?[0-9]+$" $suffix }}
{{- $exp := int (trimPrefix "+" (substr 1 -1 $suffix)) }}
{{- $v := float64 $m }}
{{- range until (int (max $exp (sub 0 $exp))) }}
{{- if gt $exp 0 }}{{ $v = mulf $v 10 }}{{ else }}{{ $v = divf $v 10 }}{{ end }}
{{- end }}
{{- $v }}
{{- else }}
{{- fail (printf "%s: %q is not a memory quantity such as 256Mi or 1Gi" $name $q) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The grace period: the delay + the write timeout (which in-flight requests get to finish), rounded up, plus the margin. */}}
{{- define "bigseg.terminationGracePeriodSeconds" -}}
{{- if hasKey .Values.shutdown "timeout" }}
{{- fail "shutdown.timeout is gone: after shutdown.delay, in-flight requests get config.BIGSEG_WRITE_TIMEOUT (15s by default) to finish" }}
{{- end }}
{{- $delay := include "bigseg.seconds" (list "shutdown.delay" .Values.shutdown.delay) | float64 }}
{{- $timeout := include "bigseg.seconds" (list "config.BIGSEG_WRITE_TIMEOUT" (dig "BIGSEG_WRITE_TIMEOUT" "15s" (.Values.config | default dict))) | float64 }}
{{- $margin := int .Values.shutdown.marginSeconds }}
{{- if lt $margin 1 }}
{{- fail "shutdown.marginSeconds: at least 1, so that the process exits before kubelet kills it" }}
{{- end }}
{{- add (ceil (addf $delay $timeout) | int) $margin }}
{{- end }}

{{/* GOMEMLIMIT: memoryLimitPercent of limits.memory, in whole MiB; empty without a limit. */}}
{{- define "bigseg.goMemLimit" -}}
{{- $limit := dig "limits" "memory" "" (.Values.resources | default dict) }}
{{- if $limit }}
{{- $pct := .Values.goRuntime.memoryLimitPercent | float64 }}
{{- if or (le $pct 0.0) (gt $pct 100.0) }}
{{- fail "goRuntime.memoryLimitPercent: more than 0, at most 100" }}
{{- end }}
{{- $bytes := include "bigseg.bytes" (list "resources.limits.memory" $limit) | float64 }}
{{- $mib := floor (divf (mulf $bytes $pct) (mulf 100 1048576)) | int64 }}
{{- if lt $mib 1 }}
{{- fail (printf "resources.limits.memory: %v leaves less than 1 MiB for GOMEMLIMIT" $limit) }}
{{- end }}
{{- printf "%dMiB" $mib }}
{{- end }}
{{- end }}

{{/* Probes: the API port (HTTPS under TLS), or the plain metrics port under mutual TLS. */}}
{{- define "bigseg.probePort" -}}
{{- if and .Values.tls.enabled .Values.tls.clientCA.enabled }}metrics{{ else }}http{{ end }}
{{- end }}

{{- define "bigseg.probeScheme" -}}
{{- if and .Values.tls.enabled (not .Values.tls.clientCA.enabled) }}HTTPS{{ else }}HTTP{{ end }}
{{- end }}

{{/*
Where the mounted secrets appear in the container. Each Secret is its own volume, mounted as a
directory (never subPath, which would not follow updates), with fixed file names.
*/}}
{{- define "bigseg.secretMounts" -}}
{{- $m := list }}
{{- with .Values.tls }}
{{- if .enabled }}
{{- $m = append $m (dict "volume" "tls" "secret" .secretName "dir" "/etc/bigseg/tls" "items" (list (dict "key" "tls.crt" "path" "tls.crt" "env" "BIGSEG_TLS_CERT_FILE") (dict "key" "tls.key" "path" "tls.key" "env" "BIGSEG_TLS_KEY_FILE"))) }}
{{- if .clientCA.enabled }}
{{- $m = append $m (dict "volume" "tls-client-ca" "secret" (.clientCA.secretName | default .secretName) "dir" "/etc/bigseg/tls-client-ca" "items" (list (dict "key" .clientCA.key "path" "ca.crt" "env" "BIGSEG_TLS_CLIENT_CA_FILE"))) }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.redis }}
{{- if .passwordSecret.name }}
{{- $m = append $m (dict "volume" "redis-password" "secret" .passwordSecret.name "dir" "/etc/bigseg/redis-password" "items" (list (dict "key" .passwordSecret.key "path" "password" "env" "BIGSEG_REDIS_PASSWORD_FILE"))) }}
{{- end }}
{{- if .sentinel.passwordSecret.name }}
{{- $m = append $m (dict "volume" "redis-sentinel-password" "secret" .sentinel.passwordSecret.name "dir" "/etc/bigseg/redis-sentinel-password" "items" (list (dict "key" .sentinel.passwordSecret.key "path" "password" "env" "BIGSEG_REDIS_SENTINEL_PASSWORD_FILE"))) }}
{{- end }}
{{- if .tls.caSecret.name }}
{{- $m = append $m (dict "volume" "redis-tls-ca" "secret" .tls.caSecret.name "dir" "/etc/bigseg/redis-tls-ca" "items" (list (dict "key" .tls.caSecret.key "path" "ca.crt" "env" "BIGSEG_REDIS_TLS_CA_FILE"))) }}
{{- end }}
{{- if .tls.clientCertSecret.name }}
{{- $m = append $m (dict "volume" "redis-tls-client" "secret" .tls.clientCertSecret.name "dir" "/etc/bigseg/redis-tls-client" "items" (list (dict "key" .tls.clientCertSecret.certKey "path" "tls.crt" "env" "BIGSEG_REDIS_TLS_CERT_FILE") (dict "key" .tls.clientCertSecret.keyKey "path" "tls.key" "env" "BIGSEG_REDIS_TLS_KEY_FILE"))) }}
{{- end }}
{{- end }}
{{- if .Values.apiTokens.secretName }}
{{- $m = append $m (dict "volume" "api-tokens" "secret" .Values.apiTokens.secretName "dir" "/etc/bigseg/api-tokens" "items" (list (dict "key" .Values.apiTokens.key "path" "tokens" "env" "BIGSEG_API_TOKENS_FILE"))) }}
{{- end }}
{{- toYaml (dict "mounts" $m) }}
{{- end }}

{{/*
bigseg.validateInventory: the inventory values, as the server checks them (BIGSEG_INVENTORY_*):
an interval of 0 (no scans) or at least 1s, whole numbers in range; a scanner needs scans.
*/}}
{{- define "bigseg.validateInventory" -}}
{{- with .Values.inventory }}
{{- $iv := .interval }}
{{- if and (not (kindIs "string" $iv)) (eq (toString $iv) "0") }}{{ $iv = "0" }}{{ end }}
{{- $secs := include "bigseg.seconds" (list "inventory.interval" $iv) | float64 }}
{{- if and (gt $secs 0.0) (lt $secs 1.0) }}
{{- fail (printf "inventory.interval: %q: want 0s (no scans) or at least 1s" $iv) }}
{{- end }}
{{- if and .scanner.enabled (eq $secs 0.0) }}
{{- fail "inventory.scanner.enabled: the scanner scans every inventory.interval, which is 0 (no scans): set an interval, or disable the scanner" }}
{{- end }}
{{- range $name, $r := dict "readsPerSecond" (list .readsPerSecond 1 -1) "maxSegments" (list .maxSegments 0 10000) }}
{{- $v := index $r 0 }}
{{- $whole := and (or (kindIs "int" $v) (kindIs "int64" $v) (kindIs "float64" $v)) (eq (float64 $v) (floor (float64 $v))) }}
{{- $min := index $r 1 }}
{{- $max := index $r 2 }}
{{- if not (and $whole (ge (float64 $v) (float64 $min)) (or (lt $max 0) (le (float64 $v) (float64 $max)))) }}
{{- if lt $max 0 }}
{{- fail (printf "inventory.%s: want a whole number, at least %d, not %v" $name $min $v) }}
{{- else }}
{{- fail (printf "inventory.%s: want a whole number from %d to %d, not %v" $name $min $max $v) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
bigseg.settings: every BIGSEG_* variable the chart sets, as a YAML map of strings, after
checking the values. The ConfigMap holds exactly this.
*/}}
{{- define "bigseg.settings" -}}
{{- include "bigseg.validate" . }}
{{- $env := dict }}
{{- $_ := set $env "BIGSEG_ADDR" (printf ":%d" (int .Values.ports.http)) }}
{{- $_ = set $env "BIGSEG_METRICS_ADDR" (printf ":%d" (int .Values.ports.metrics)) }}
{{- $_ = set $env "BIGSEG_SHUTDOWN_DELAY" .Values.shutdown.delay }}
{{- with .Values.inventory }}
{{- $_ = set $env "BIGSEG_INVENTORY_INTERVAL" (toString .interval) }}
{{- $_ = set $env "BIGSEG_INVENTORY_READS_PER_SECOND" (printf "%d" (int64 .readsPerSecond)) }}
{{- $_ = set $env "BIGSEG_INVENTORY_MAX_SEGMENTS" (printf "%d" (int64 .maxSegments)) }}
{{- end }}
{{- with include "bigseg.environments" . }}{{ $_ = set $env "BIGSEG_ENVIRONMENTS" . }}{{ end }}
{{- if .Values.resp.enabled }}
{{- $_ = set $env "BIGSEG_RESP_ADDR" (printf ":%d" (int .Values.ports.resp)) }}
{{- end }}
{{- with .Values.redis }}
{{- if .url }}{{ $_ = set $env "BIGSEG_REDIS_URL" .url }}{{ end }}
{{- if .cluster.url }}{{ $_ = set $env "BIGSEG_REDIS_CLUSTER_URL" .cluster.url }}{{ end }}
{{- if .sentinel.url }}{{ $_ = set $env "BIGSEG_REDIS_SENTINEL_URL" .sentinel.url }}{{ end }}
{{- end }}
{{- if .Values.dynamodb.table }}
{{- $_ = set $env "BIGSEG_DYNAMODB_TABLE" .Values.dynamodb.table }}
{{- $_ = set $env "BIGSEG_DYNAMODB_CONSISTENT_READ" (toString .Values.dynamodb.consistentRead) }}
{{- end }}
{{- if .Values.tls.enabled }}
{{- $_ = set $env "BIGSEG_METRICS_TLS" (toString .Values.tls.metrics) }}
{{- end }}
{{- range (include "bigseg.secretMounts" . | fromYaml).mounts }}
{{- $dir := .dir }}
{{- range .items }}
{{- $_ = set $env .env (printf "%s/%s" $dir .path) }}
{{- end }}
{{- end }}
{{- range $k, $v := .Values.config }}
{{- if kindIs "invalid" $v }}
{{- /* null: unset, the server's default applies */ -}}
{{- else if and (kindIs "float64" $v) (eq $v (floor $v)) }}
{{- $_ = set $env $k (printf "%d" (int64 $v)) }}
{{- else if or (kindIs "map" $v) (kindIs "slice" $v) }}
{{- fail (printf "config.%s: want a string, number or boolean" $k) }}
{{- else }}
{{- $_ = set $env $k (toString $v) }}
{{- end }}
{{- end }}
{{- toYaml $env }}
{{- end }}

{{/*
bigseg.environments: BIGSEG_ENVIRONMENTS, the name=prefix pairs of .Values.environments in
the names' order, after checking each as the server would; empty without environments. A
null prefix (an override removing an environment) leaves that name out.
*/}}
{{- define "bigseg.environments" -}}
{{- $envs := .Values.environments | default dict }}
{{- if not (kindIs "map" $envs) }}
{{- fail (printf "environments: want a map of name: key prefix, such as {production: ld-prod}, not %v" $envs) }}
{{- end }}
{{- $pairs := list }}
{{- $prefixes := dict }}
{{- range $name, $prefix := $envs }}
{{- if kindIs "invalid" $prefix }}
{{- continue }}
{{- end }}
{{- if not (regexMatch "^[a-z0-9][a-z0-9_-]{0,62}$" $name) }}
{{- fail (printf "environments: %q is not an environment name: lower-case letters, digits, - and _, starting with a letter or digit, at most 63 (it is part of paths and of the metrics' environment label)" $name) }}
{{- end }}
{{- if not (kindIs "string" $prefix) }}
{{- fail (printf "environments.%s: want its key prefix, a string (quote it), not %v" $name $prefix) }}
{{- end }}
{{- if or (eq $prefix "") (regexMatch "[\\s,]" $prefix) }}
{{- fail (printf "environments.%s: %q is not a key prefix: one without white space or commas" $name $prefix) }}
{{- end }}
{{- if hasKey $prefixes $prefix }}
{{- fail (printf "environments.%s: the prefix %q is environments.%s's too" $name $prefix (get $prefixes $prefix)) }}
{{- end }}
{{- $_ := set $prefixes $prefix $name }}
{{- $pairs = append $pairs (printf "%s=%s" $name $prefix) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{/*
bigseg.validate: refuses values that would not work, or would put a secret in clear, naming
the value at fault.
*/}}
{{- define "bigseg.validate" -}}
{{- $_ := include "bigseg.terminationGracePeriodSeconds" . }}
{{- $_ = include "bigseg.goMemLimit" . }}
{{- include "bigseg.validateInventory" . }}
{{- $structured := dict
  "BIGSEG_ADDR" "ports.http"
  "BIGSEG_METRICS_ADDR" "ports.metrics"
  "BIGSEG_METRICS_TLS" "tls.metrics"
  "BIGSEG_TLS_CERT_FILE" "tls.enabled and tls.secretName"
  "BIGSEG_TLS_KEY_FILE" "tls.enabled and tls.secretName"
  "BIGSEG_TLS_CLIENT_CA_FILE" "tls.clientCA"
  "BIGSEG_REDIS_URL" "redis.url"
  "BIGSEG_REDIS_CLUSTER_URL" "redis.cluster.url"
  "BIGSEG_REDIS_SENTINEL_URL" "redis.sentinel.url"
  "BIGSEG_REDIS_SENTINEL_PASSWORD_FILE" "redis.sentinel.passwordSecret"
  "BIGSEG_REDIS_PASSWORD_FILE" "redis.passwordSecret"
  "BIGSEG_REDIS_TLS_CA_FILE" "redis.tls.caSecret"
  "BIGSEG_REDIS_TLS_CERT_FILE" "redis.tls.clientCertSecret"
  "BIGSEG_REDIS_TLS_KEY_FILE" "redis.tls.clientCertSecret"
  "BIGSEG_API_TOKENS_FILE" "apiTokens.secretName"
  "BIGSEG_SHUTDOWN_DELAY" "shutdown.delay"
  "BIGSEG_ENVIRONMENTS" "environments"
  "BIGSEG_RESP_ADDR" "resp.enabled and ports.resp"
  "BIGSEG_DYNAMODB_TABLE" "dynamodb.table"
  "BIGSEG_DYNAMODB_CONSISTENT_READ" "dynamodb.consistentRead"
  "BIGSEG_INVENTORY_INTERVAL" "inventory.interval"
  "BIGSEG_INVENTORY_READS_PER_SECOND" "inventory.readsPerSecond"
  "BIGSEG_INVENTORY_MAX_SEGMENTS" "inventory.maxSegments" }}
{{- $inClear := dict "BIGSEG_API_TOKENS" "apiTokens.secretName" }}
{{- range $k, $v := .Values.config }}
{{- if hasKey $inClear $k }}
{{- fail (printf "config.%s: secrets never go in values; mount an existing Secret with %s" $k (get $inClear $k)) }}
{{- else if hasKey $structured $k }}
{{- fail (printf "config.%s: set it with %s, not config" $k (get $structured $k)) }}
{{- else if not (regexMatch "^BIGSEG_[A-Z0-9_]+$" $k) }}
{{- fail (printf "config.%s: only BIGSEG_* settings go in config" $k) }}
{{- end }}
{{- end }}
{{- $environments := len (compact (splitList "," (include "bigseg.environments" .))) }}
{{- if and $environments (hasKey .Values.config "BIGSEG_PREFIX") (not (kindIs "invalid" .Values.config.BIGSEG_PREFIX)) }}
{{- fail "config.BIGSEG_PREFIX: not with environments: give each environment's prefix there" }}
{{- end }}
{{- if and (gt $environments 1) (not (or .Values.redis.url .Values.redis.cluster.url .Values.redis.sentinel.url .Values.dynamodb.table)) }}
{{- fail "environments: several need Redis or DynamoDB (redis.url, redis.cluster.url, redis.sentinel.url or dynamodb.table): the embedded store serves one" }}
{{- end }}
{{- with .Values.redis }}
{{- if .cluster.addrs }}
{{- fail "redis.cluster.addrs is gone: give redis.cluster.url, redis://host1:port?addr=host2:port&addr=host3:port (docs/redis.md)" }}
{{- end }}
{{- if or .sentinel.addrs .sentinel.master }}
{{- fail "redis.sentinel.addrs and redis.sentinel.master are gone: give redis.sentinel.url, redis://sentinel1:port?addr=sentinel2:port&master_name=<master> (docs/redis.md)" }}
{{- end }}
{{- if .tls.enabled }}
{{- fail "redis.tls.enabled is gone: a rediss:// URL turns TLS on" }}
{{- end }}
{{- $urls := dict }}
{{- if .url }}{{ $_ := set $urls "redis.url" .url }}{{ end }}
{{- if .cluster.url }}{{ $_ := set $urls "redis.cluster.url" .cluster.url }}{{ end }}
{{- if .sentinel.url }}{{ $_ := set $urls "redis.sentinel.url" .sentinel.url }}{{ end }}
{{- if gt (len $urls) 1 }}
{{- fail "redis: choose one of url, cluster.url and sentinel.url" }}
{{- end }}
{{- $pw := "redis.passwordSecret" }}
{{- $scannerURL := $.Values.inventory.scanner.redisURL }}
{{- if and $.scanner $scannerURL }}
{{- /* The scanner's URL took the place of the servers': name the value the user wrote. */}}
{{- $named := dict }}
{{- range $k, $u := $urls }}
{{- if eq $u $scannerURL }}{{ $_ := set $named (printf "inventory.scanner.redisURL (in place of %s)" $k) $u }}{{ else }}{{ $_ := set $named $k $u }}{{ end }}
{{- end }}
{{- $urls = $named }}
{{- $pw = "inventory.scanner.passwordSecret" }}
{{- end }}
{{- range $name, $url := $urls }}
{{- if regexMatch "^[a-z]+://[^/@]*:[^/@]*@" $url }}
{{- fail (printf "%s: holds a password; put it in a Secret and name it in %s (the sentinels': redis.sentinel.passwordSecret)" $name $pw) }}
{{- end }}
{{- if regexMatch "[?&]password=" $url }}
{{- fail (printf "%s: holds a password; put it in a Secret and name it in %s" $name $pw) }}
{{- end }}
{{- if and (or $.Values.redis.tls.caSecret.name $.Values.redis.tls.clientCertSecret.name) (not (hasPrefix "rediss://" $url)) }}
{{- fail (printf "%s: redis.tls.caSecret and redis.tls.clientCertSecret need a rediss:// URL" $name) }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.dynamodb }}
{{- if .table }}
{{- $redis := list }}
{{- if and $.scanner $.Values.inventory.scanner.redisURL }}{{ $redis = append $redis "inventory.scanner.redisURL (a Redis URL for the scanner)" }}
{{- else if $.Values.redis.url }}{{ $redis = append $redis "redis.url" }}{{ end }}
{{- if $.Values.redis.cluster.url }}{{ $redis = append $redis "redis.cluster.url" }}{{ end }}
{{- if $.Values.redis.sentinel.url }}{{ $redis = append $redis "redis.sentinel.url" }}{{ end }}
{{- if $redis }}
{{- fail (printf "dynamodb.table: not with %s: choose one store" (join " or " $redis)) }}
{{- end }}
{{- if not (kindIs "bool" .consistentRead) }}
{{- fail (printf "dynamodb.consistentRead: want true or false, not %v" .consistentRead) }}
{{- end }}
{{- if and $.Values.networkPolicy.enabled $.Values.networkPolicy.egress }}
{{- $https := false }}
{{- range $.Values.networkPolicy.egress }}
{{- if not .ports }}{{ $https = true }}{{ end }}
{{- range .ports }}{{ if or (not .port) (eq (toString .port) "443") }}{{ $https = true }}{{ end }}{{ end }}
{{- end }}
{{- if and (not $https) (not .endpoint) }}
{{- fail "networkPolicy.egress: with dynamodb.table, allow HTTPS (TCP 443) to DynamoDB (and STS, for IRSA)" }}
{{- end }}
{{- end }}
{{- else }}
{{- if or .region .endpoint }}
{{- fail "dynamodb.region and dynamodb.endpoint: only with dynamodb.table" }}
{{- end }}
{{- if and (kindIs "bool" .consistentRead) (not .consistentRead) }}
{{- fail "dynamodb.consistentRead: only with dynamodb.table" }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.otel }}
{{- if .endpoint }}
{{- if not (regexMatch "^https?://[^/?#@]+(/[^?#]*)?$" .endpoint) }}
{{- fail (printf "otel.endpoint: %q is not an http:// or https:// URL (without credentials: use otel.headersSecret)" .endpoint) }}
{{- end }}
{{- else if or .protocol .headersSecret.name .metrics .egressTo }}
{{- fail "otel.protocol, otel.headersSecret, otel.metrics and otel.egressTo: only with otel.endpoint" }}
{{- end }}
{{- if not (has .protocol (list "" "grpc" "http/protobuf")) }}
{{- fail (printf "otel.protocol: grpc or http/protobuf, not %q" .protocol) }}
{{- end }}
{{- if and .headersSecret.name (not .headersSecret.key) }}
{{- fail "otel.headersSecret.key: required with otel.headersSecret.name" }}
{{- end }}
{{- end }}
{{- with .Values.tls }}
{{- if and .enabled (not .secretName) }}
{{- fail "tls.secretName: required with tls.enabled (a kubernetes.io/tls Secret)" }}
{{- end }}
{{- if and .clientCA.enabled (not .enabled) }}
{{- fail "tls.clientCA.enabled: requires tls.enabled" }}
{{- end }}
{{- if and .metrics (not .enabled) }}
{{- fail "tls.metrics: requires tls.enabled" }}
{{- end }}
{{- if and .clientCA.enabled .metrics }}
{{- fail "tls.metrics: not with tls.clientCA: under mutual TLS kubelet's probes use the metrics port, which must stay plain HTTP" }}
{{- end }}
{{- if hasKey . "resp" }}
{{- fail "tls.resp is gone: the Redis-protocol listener serves TLS whenever tls.enabled" }}
{{- end }}
{{- end }}
{{- if eq (int .Values.ports.http) (int .Values.ports.metrics) }}
{{- fail "ports.metrics: must differ from ports.http" }}
{{- end }}
{{- if and .Values.resp.enabled (or (eq (int .Values.ports.resp) (int .Values.ports.http)) (eq (int .Values.ports.resp) (int .Values.ports.metrics))) }}
{{- fail "ports.resp: must differ from ports.http and ports.metrics" }}
{{- end }}
{{- with .Values.autoscaling }}
{{- if and .enabled (gt (int .minReplicas) (int .maxReplicas)) }}
{{- fail "autoscaling.minReplicas: more than autoscaling.maxReplicas" }}
{{- end }}
{{- end }}
{{- if not (or .Values.redis.url .Values.redis.cluster.url .Values.redis.sentinel.url .Values.dynamodb.table .Values.config.BIGSEG_SEED_FILE) }}
{{- fail "no store: set redis.url, redis.cluster.url, redis.sentinel.url or dynamodb.table (or config.BIGSEG_SEED_FILE, such as /examples/memberships.json, to try bigseg out on the embedded store); bigseg refuses to start without one" }}
{{- end }}
{{- end }}

{{/* The OpenTelemetry collector's port: otel.endpoint's, else its scheme's (443, 80). */}}
{{- define "bigseg.otelPort" -}}
{{- $u := urlParse .Values.otel.endpoint }}
{{- $port := regexFind ":[0-9]+$" $u.host | trimPrefix ":" }}
{{- if $port }}{{ $port }}{{ else if eq $u.scheme "https" }}443{{ else }}80{{ end }}
{{- end }}
