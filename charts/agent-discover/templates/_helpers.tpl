{{/* Names, labels and the Secrets the chart reads from (its own or the user's). */}}

{{- define "agent-discover.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "agent-discover.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "agent-discover.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agent-discover.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "agent-discover.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "agent-discover.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "agent-discover.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The chart's own Secret, made from values given inline. */}}
{{- define "agent-discover.secretName" -}}
{{- include "agent-discover.fullname" . -}}
{{- end -}}

{{- define "agent-discover.postgresSecret" -}}
{{- .Values.postgres.existingSecret | default (include "agent-discover.secretName" .) -}}
{{- end -}}

{{- define "agent-discover.masterKeySecret" -}}
{{- .Values.masterKey.existingSecret | default (include "agent-discover.secretName" .) -}}
{{- end -}}

{{- define "agent-discover.tokenSecret" -}}
{{- .Values.dashboardToken.existingSecret | default (include "agent-discover.secretName" .) -}}
{{- end -}}

{{- define "agent-discover.tokenEnabled" -}}
{{- if and (not .Values.identity.issuer) (or .Values.dashboardToken.existingSecret .Values.dashboardToken.value) -}}true{{- end -}}
{{- end -}}

{{- define "agent-discover.publicUrl" -}}
{{- if .Values.publicUrl -}}
{{- .Values.publicUrl -}}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts -}}
{{- $host := (first .Values.ingress.hosts).host -}}
{{- printf "%s://%s" (ternary "https" "http" (gt (len .Values.ingress.tls) 0)) $host -}}
{{- end -}}
{{- end -}}

{{/* Host names accepted in Host: the Service's names, the Ingress hosts, and allowedHosts. */}}
{{- define "agent-discover.allowedHosts" -}}
{{- $svc := include "agent-discover.fullname" . -}}
{{- $hosts := list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) -}}
{{- if .Values.ingress.enabled -}}
{{- range .Values.ingress.hosts -}}
{{- $hosts = append $hosts .host -}}
{{- end -}}
{{- end -}}
{{- range .Values.allowedHosts -}}
{{- $hosts = append $hosts . -}}
{{- end -}}
{{- $hosts | uniq | join "," -}}
{{- end -}}
