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

{{- define "kmon.eventsEnv" -}}
- {name: KMON_EVENTS_BOOTSTRAP_SERVERS, value: {{ required "events.bootstrapServers is required" .Values.events.bootstrapServers | quote }}}
- {name: KMON_EVENTS_TOPIC, value: {{ .Values.events.topic | quote }}}
{{- if .Values.events.clientSecret }}
- {name: KMON_EVENTS_COMMAND_CONFIG, value: /etc/kmon/events/client.properties}
{{- end }}
{{- end -}}
