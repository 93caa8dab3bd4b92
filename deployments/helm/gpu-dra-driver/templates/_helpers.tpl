{{- define "gpu-dra-driver.fullname" -}}
{{- printf "%s" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpu-dra-driver.serviceAccountName" -}}
{{- printf "%s-kubelet-plugin" (include "gpu-dra-driver.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpu-dra-driver.labels" -}}
app.kubernetes.io/name: gpu-dra-driver
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "gpu-dra-driver.selectorLabels" -}}
app.kubernetes.io/name: gpu-dra-driver
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: kubelet-plugin
{{- end -}}

{{- define "gpu-dra-driver.webhookName" -}}
{{- printf "%s-webhook" (include "gpu-dra-driver.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The webhook's pods have a name of their own: tools and tests select the
kubelet plugin's pods by app.kubernetes.io/name=gpu-dra-driver. */}}
{{- define "gpu-dra-driver.webhookSelectorLabels" -}}
app.kubernetes.io/name: gpu-dra-driver-webhook
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end -}}
