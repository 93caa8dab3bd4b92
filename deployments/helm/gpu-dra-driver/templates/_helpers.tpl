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

{{/* A value as a CEL literal whose every element is dyn(): the API server
type-checks policy expressions with homogeneous aggregate literals, so a map
or list literal may mix value types (strings, bools, maps) only as dyn. */}}
{{- define "gpu-dra-driver.celLiteral" -}}
{{- $v := . -}}
{{- if kindIs "map" $v -}}
{{- $parts := list -}}
{{- range $k, $x := $v -}}
{{- $parts = append $parts (printf "%s: dyn(%s)" (toJson $k) (include "gpu-dra-driver.celLiteral" $x)) -}}
{{- end -}}
{{- printf "{%s}" (join ", " $parts) -}}
{{- else if kindIs "slice" $v -}}
{{- $parts := list -}}
{{- range $x := $v -}}
{{- $parts = append $parts (printf "dyn(%s)" (include "gpu-dra-driver.celLiteral" $x)) -}}
{{- end -}}
{{- printf "[%s]" (join ", " $parts) -}}
{{- else -}}
{{- toJson $v -}}
{{- end -}}
{{- end -}}

{{/* The PriorityClass of MPS daemon pods: the plugin's flag and the daemon-pod
policy (mps-admissionpolicy.yaml) must agree on it. */}}
{{- define "gpu-dra-driver.mpsPriorityClassName" -}}
{{- (.Values.sharing.mps | default dict).priorityClassName | default "system-node-critical" -}}
{{- end -}}
