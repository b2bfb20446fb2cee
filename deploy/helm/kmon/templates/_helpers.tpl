{{- define "kmon.labels" -}}
app.kubernetes.io/name: kmon
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "kmon.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}

{{- /* Where the config file is mounted in every container. */ -}}
{{- define "kmon.configPath" -}}
/etc/kmon/config/kmon.yaml
{{- end -}}

{{- /* The config file's text: its keys are the commands' flags (kmon/config_file.py). The mode, the
controllers and whether to sample are the values' (kmon run finds them out; a chart cannot). */ -}}
{{- define "kmon.configFile" -}}
{{- $names := dict -}}
clusters:
{{- range $cluster := .Values.clusters }}
{{- if not (regexMatch "^[A-Za-z0-9][A-Za-z0-9._-]*$" (toString $cluster.name)) }}
{{- fail (printf "clusters: %q is not a cluster name (letters, digits, '.', '_', '-')" (toString $cluster.name)) }}
{{- end }}
{{- if hasKey $names $cluster.name }}
{{- fail (printf "clusters: %q is named twice" $cluster.name) }}
{{- end }}
{{- $_ := set $names $cluster.name true }}
{{- if not (has $cluster.mode (list "zookeeper" "kraft")) }}
{{- fail (printf "clusters[%s].mode: %q is not zookeeper or kraft" $cluster.name (toString $cluster.mode)) }}
{{- end }}
  - cluster: {{ $cluster.name | quote }}
    bootstrap-servers: {{ required (printf "clusters[%s].bootstrapServers is required" $cluster.name) $cluster.bootstrapServers | quote }}
    {{- if eq $cluster.mode "zookeeper" }}
    zookeeper: {{ required (printf "clusters[%s].zookeeper is required in mode zookeeper" $cluster.name) $cluster.zookeeper | quote }}
    {{- else if $cluster.sampled }}
    sampled: true
    {{- else }}
    controllers: {{ required (printf "clusters[%s].controllers is required in mode kraft (or sampled: true)" $cluster.name) $cluster.controllers | quote }}
    {{- end }}
    {{- if $cluster.clientSecret }}
    command-config: /etc/kmon/client/client.properties
    {{- if eq $cluster.mode "zookeeper" }}
    zk-client-config: /etc/kmon/client/zookeeper.properties
    {{- end }}
    {{- end }}
    {{- with $cluster.client }}
    client:
      {{- range $key, $value := . }}
      {{ $key }}: {{ $value | toString | quote }}
      {{- end }}
    {{- end }}
{{- end }}
events:
  bootstrap-servers: {{ required "events.bootstrapServers is required" .Values.events.bootstrapServers | quote }}
  topic: {{ .Values.events.topic | quote }}
  {{- if .Values.events.clientSecret }}
  command-config: /etc/kmon/events/client.properties
  {{- end }}
{{- if .Values.web.secret }}
web-config-file: /etc/kmon/web/web-config.yml
{{- end }}
stream:
  checkpoint: /var/lib/kmon/checkpoint
  metrics-port: {{ .Values.stream.port }}
  {{- if .Values.stream.triggerInterval }}
  trigger-interval: {{ .Values.stream.triggerInterval }}
  {{- end }}
{{- end -}}


{{- /* A container's readiness or liveness check of its port named by the argument's "port" at "path":
an HTTP(S) GET, or, where basic auth guards every path, whether the port answers. */ -}}
{{- define "kmon.probe" -}}
{{- if .root.Values.web.basicAuth -}}
tcpSocket: {port: {{ .port }}}
{{- else -}}
httpGet: {path: {{ .path }}, port: {{ .port }}, scheme: {{ ternary "HTTPS" "HTTP" .root.Values.web.tls }}}
{{- end -}}
{{- end -}}

{{- /* The web config's Secret: a volume and its mount, in every kmon container. */ -}}
{{- define "kmon.webMount" -}}
{{- if .Values.web.secret }}
- {name: web, mountPath: /etc/kmon/web, readOnly: true}
{{- end }}
{{- end -}}
{{- define "kmon.webVolume" -}}
{{- if .Values.web.secret }}
- name: web
  secret: {secretName: {{ .Values.web.secret }}, defaultMode: 0400}
{{- end }}
{{- end -}}

{{- /* A ServiceMonitor endpoint's scheme and credentials. */ -}}
{{- define "kmon.scrapeAuth" -}}
{{- if .Values.web.tls }}, scheme: https{{ with .Values.serviceMonitor.tlsConfig }}, tlsConfig: {{ toJson . }}{{ end }}{{ end }}
{{- with .Values.serviceMonitor.basicAuth }}, basicAuth: {{ toJson . }}{{ end }}
{{- end -}}
