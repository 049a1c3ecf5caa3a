{{/*
Object names are fixed, not derived from the release name: the APIService
v1alpha2.jobset.x-k8s.io is cluster-wide, so there is one installation per
cluster, and the names match artifacts/deploy.
*/}}

{{/* The chart label value: name-version, with "+" not allowed in labels. */}}
{{- define "jobset.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Helm's standard labels, on every object. Selectors never use them, so
upgrades can change them.
*/}}
{{- define "jobset.labels" -}}
helm.sh/chart: {{ include "jobset.chart" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- with .Chart.AppVersion }}
app.kubernetes.io/version: {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
Labels of the objects of artifacts/deploy/base, which adds part-of there;
the overlays, the cert-manager component and artifacts/monitoring do not,
and the chart installs the same objects.
*/}}
{{- define "jobset.baseLabels" -}}
app.kubernetes.io/part-of: jobset
{{ include "jobset.labels" . }}
{{- end -}}

{{/*
Image reference of a component: (dict "root" $ "image" .Values.<component>.image).
A digest wins over the tag; the tag defaults to the appVersion. The digest
check repeats values.schema.json for --skip-schema-validation.
*/}}
{{- define "jobset.image" -}}
{{- $repo := .image.repository -}}
{{- with .root.Values.image.registry -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" .) $repo -}}
{{- end -}}
{{- if .image.digest -}}
{{- if not (regexMatch "^sha256:[a-f0-9]{64}$" .image.digest) -}}
{{- fail (printf "image digest %q of %s is not sha256:<64 lowercase hex digits>" .image.digest .image.repository) -}}
{{- end -}}
{{- printf "%s@%s" $repo .image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (.image.tag | default .root.Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* imagePullPolicy and imagePullSecrets are only rendered when set. */}}
{{- define "jobset.pullPolicy" -}}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end -}}

{{- define "jobset.pullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- toYaml . | nindent 0 }}
{{- end }}
{{- end -}}

{{/*
Scheduling fields of a pod spec: (dict "values" .Values.<component>
"affinity" <affinity to use> "spread" <topology spread constraints>).
*/}}
{{- define "jobset.placement" -}}
{{- with .values.nodeSelector }}
nodeSelector:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
{{- toYaml . | nindent 0 }}
{{- end }}
{{- with .affinity }}
affinity:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .spread }}
topologySpreadConstraints:
{{- toYaml . | nindent 0 }}
{{- end }}
{{- with .values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/* The etcd mode, checked once for all templates. */}}
{{- define "jobset.etcdMode" -}}
{{- $mode := .Values.apiserver.etcd.mode -}}
{{- if not (has $mode (list "embedded" "external")) -}}
{{- fail (printf "apiserver.etcd.mode must be embedded or external, not %q" $mode) -}}
{{- end -}}
{{- $mode -}}
{{- end -}}
