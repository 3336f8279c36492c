{{- define "bigseg.deployment" -}}
{{- /* . is the chart's root, or the scanner's (scanner.yaml): its values, and scanner: true. */ -}}
{{- $name := include "bigseg.fullname" . }}
{{- if .scanner }}{{ $name = printf "%s-inventory-scanner" $name | trunc 63 | trimSuffix "-" }}{{ end }}
{{- $mounts := (include "bigseg.secretMounts" . | fromYaml).mounts }}
{{- $goMemLimit := include "bigseg.goMemLimit" . }}
{{- $cpuLimit := dig "limits" "cpu" "" (.Values.resources | default dict) }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  labels:
    {{- include "bigseg.labels" . | nindent 4 }}
spec:
  {{- if .scanner }}
  # One scanner: it holds the inventory lease; a second would only wait for it.
  replicas: 1
  {{- else if not .Values.autoscaling.enabled }}
  replicas: {{ .Values.replicaCount }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "bigseg.selectorLabels" . | nindent 6 }}
  {{- with .Values.strategy }}
  strategy:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  template:
    metadata:
      annotations:
        checksum/config: {{ include "bigseg.settings" . | sha256sum }}
        {{- with .Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      labels:
        {{- include "bigseg.labels" . | nindent 8 }}
        {{- with .Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "bigseg.serviceAccountName" . }}
      automountServiceAccountToken: false
      # A Service named like a BIGSEG_ prefix (a release "bigseg", a Redis "bigseg-redis")
      # would otherwise inject BIGSEG_*_PORT variables into the server's environment.
      enableServiceLinks: false
      {{- with .Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      # BIGSEG_SHUTDOWN_DELAY + BIGSEG_WRITE_TIMEOUT, rounded up, + shutdown.marginSeconds.
      terminationGracePeriodSeconds: {{ include "bigseg.terminationGracePeriodSeconds" . }}
      {{- with .Values.podSecurityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: bigseg
          image: {{ include "bigseg.image" . }}
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          {{- with .Values.securityContext }}
          securityContext:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          ports:
            - name: http
              containerPort: {{ .Values.ports.http }}
              protocol: TCP
            - name: metrics
              containerPort: {{ .Values.ports.metrics }}
              protocol: TCP
            {{- if .Values.resp.enabled }}
            - name: resp
              containerPort: {{ .Values.ports.resp }}
              protocol: TCP
            {{- end }}
          envFrom:
            - configMapRef:
                name: {{ $name }}
          {{- if or $goMemLimit (and $cpuLimit .Values.goRuntime.maxProcsFromCPULimit) (and .Values.dynamodb.table (or .Values.dynamodb.region .Values.dynamodb.endpoint)) .Values.otel.endpoint }}
          env:
            {{- if .Values.dynamodb.table }}
            {{- with .Values.dynamodb.region }}
            # dynamodb.region, as the AWS SDK reads it.
            - name: AWS_REGION
              value: {{ . | quote }}
            {{- end }}
            {{- with .Values.dynamodb.endpoint }}
            # dynamodb.endpoint, as the AWS SDK reads it.
            - name: AWS_ENDPOINT_URL_DYNAMODB
              value: {{ . | quote }}
            {{- end }}
            {{- end }}
            {{- with .Values.otel }}
            {{- with .endpoint }}
            # otel.endpoint, as the OpenTelemetry SDK reads it.
            - name: OTEL_EXPORTER_OTLP_ENDPOINT
              value: {{ . | quote }}
            {{- end }}
            {{- with .protocol }}
            # otel.protocol.
            - name: OTEL_EXPORTER_OTLP_PROTOCOL
              value: {{ . | quote }}
            {{- end }}
            {{- if .headersSecret.name }}
            # otel.headersSecret: the collector's credentials, never in values.
            - name: OTEL_EXPORTER_OTLP_HEADERS
              valueFrom:
                secretKeyRef:
                  name: {{ .headersSecret.name }}
                  key: {{ .headersSecret.key }}
            {{- end }}
            {{- if .metrics }}
            # otel.metrics.
            - name: OTEL_METRICS_EXPORTER
              value: otlp
            {{- end }}
            {{- end }}
            {{- with $goMemLimit }}
            # goRuntime.memoryLimitPercent of limits.memory.
            - name: GOMEMLIMIT
              value: {{ . | quote }}
            {{- end }}
            {{- if and $cpuLimit .Values.goRuntime.maxProcsFromCPULimit }}
            # limits.cpu, rounded up to whole CPUs.
            - name: GOMAXPROCS
              valueFrom:
                resourceFieldRef:
                  containerName: bigseg
                  resource: limits.cpu
                  divisor: "1"
            {{- end }}
          {{- end }}
          livenessProbe:
            httpGet:
              path: /livez
              port: {{ include "bigseg.probePort" . }}
              scheme: {{ include "bigseg.probeScheme" . }}
            {{- with .Values.probes.liveness }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          readinessProbe:
            httpGet:
              path: /readyz
              port: {{ include "bigseg.probePort" . }}
              scheme: {{ include "bigseg.probeScheme" . }}
            {{- with .Values.probes.readiness }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- with .Values.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- if $mounts }}
          volumeMounts:
            {{- range $mounts }}
            - name: {{ .volume }}
              mountPath: {{ .dir }}
              readOnly: true
            {{- end }}
          {{- end }}
      {{- if $mounts }}
      volumes:
        {{- range $mounts }}
        - name: {{ .volume }}
          secret:
            secretName: {{ .secret }}
            # Readable by the pod's fsGroup, not by other users.
            defaultMode: 0440
            items:
              {{- range .items }}
              - key: {{ .key }}
                path: {{ .path }}
              {{- end }}
        {{- end }}
      {{- end }}
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.topologySpreadConstraints }}
      topologySpreadConstraints:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end }}
