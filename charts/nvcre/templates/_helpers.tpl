{{- define "nvcre.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "nvcre.labels" -}}
app.kubernetes.io/name: {{ include "nvcre.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "nvcre.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nvcre.name" . }}
app.kubernetes.io/component: manager
{{- end -}}

{{- define "nvcre.serviceAccountName" -}}
{{ include "nvcre.name" . }}-manager
{{- end -}}

{{- define "nvcre.image" -}}
{{- $image := .Values.manager.image -}}
{{- if $image.digest -}}
{{ $image.repository }}@{{ $image.digest }}
{{- else -}}
{{ $image.repository }}:{{ default .Chart.AppVersion $image.tag }}
{{- end -}}
{{- end -}}
