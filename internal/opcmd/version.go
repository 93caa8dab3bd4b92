// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package opcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/version"
)

// PluginPodSelector selects the kubelet plugin's pods of every release of
// the chart (templates/_helpers.tpl, gpu-dra-driver.selectorLabels).
const PluginPodSelector = "app.kubernetes.io/name=gpu-dra-driver,app.kubernetes.io/component=kubelet-plugin"

// AddVersion gives root --version and a `version` command: the binary's
// build (pkg/version) and, unless --client, the driver the cluster runs.
func AddVersion(root *cobra.Command, prog string) {
	root.Version = version.Get().String()
	root.AddCommand(newVersionCommand(prog))
}

// DriverVersion is one driver build the cluster runs: the image of the
// plugin pods of one namespace, and how many run it (two during a rolling
// update).
type DriverVersion struct {
	Namespace string `json:"namespace"`
	Image     string `json:"image"`
	// Version is the image's tag: the chart's appVersion for a release
	// (its default image tag follows it), a commit for a local build.
	Version string `json:"version"`
	Pods    int    `json:"pods"`
}

type versionReport struct {
	Client  version.Info    `json:"client"`
	Drivers []DriverVersion `json:"drivers,omitempty"`
}

func newVersionCommand(prog string) *cobra.Command {
	c := newCluster()
	var client bool
	var format string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "This binary's version, commit and build date, and the driver version the cluster runs",
		Long: `version prints this binary's version, the commit it was built from and that
commit's date; then, unless --client, the driver the cluster runs: the image
of the kubelet plugin's pods (label ` + PluginPodSelector + `),
whose tag is the release's version, in every namespace (or -n's).`,
		Example: fmt.Sprintf("  %[1]s version\n  %[1]s version --client\n  %[1]s version -o json", prog),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "" && format != "json" {
				return fmt.Errorf("--output %q: want json, or nothing for text", format)
			}
			if c.from != "" {
				return fmt.Errorf("--from: version reads a live cluster, not a recorded state; drop --from")
			}
			r := versionReport{Client: version.Get()}
			var err error
			if !client {
				var cs kubernetes.Interface
				if cs, err = c.client(); err == nil {
					ctx, cancel := context.WithTimeout(cmd.Context(), c.timeout)
					r.Drivers, err = clusterDrivers(ctx, cs, c.explicitNamespace())
					cancel()
				}
			}
			if format == "json" {
				if perr := printJSON(cmd.OutOrStdout(), r); perr != nil {
					return perr
				}
				return err
			}
			printVersion(cmd.OutOrStdout(), prog, r, client, err == nil)
			return err
		},
	}
	f := cmd.Flags()
	c.addFlags(f, prog)
	f.BoolVar(&client, "client", false, "print only this binary's version; do not read the cluster")
	f.StringVarP(&format, "output", "o", "", "json, or nothing for text")
	return cmd
}

// clusterDrivers lists the plugin pods (in namespace, or all when "")
// and groups them by namespace and image.
func clusterDrivers(ctx context.Context, cs kubernetes.Interface, namespace string) ([]DriverVersion, error) {
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: PluginPodSelector})
	if err != nil {
		return nil, fmt.Errorf("listing the driver's plugin pods: %w", err)
	}
	return groupDrivers(pods.Items), nil
}

func groupDrivers(pods []corev1.Pod) []DriverVersion {
	var out []DriverVersion
	for _, p := range pods {
		image := pluginImage(p)
		i := slices.IndexFunc(out, func(d DriverVersion) bool { return d.Namespace == p.Namespace && d.Image == image })
		if i < 0 {
			out = append(out, DriverVersion{Namespace: p.Namespace, Image: image, Version: imageTag(image)})
			i = len(out) - 1
		}
		out[i].Pods++
	}
	slices.SortFunc(out, func(a, b DriverVersion) int {
		return strings.Compare(a.Namespace+" "+a.Image, b.Namespace+" "+b.Image)
	})
	return out
}

// pluginImage is the image of the container named "plugin" (the chart's),
// else of the first container.
func pluginImage(p corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		if c.Name == "plugin" {
			return c.Image
		}
	}
	if len(p.Spec.Containers) > 0 {
		return p.Spec.Containers[0].Image
	}
	return ""
}

// imageTag is REPO:TAG's TAG (a port in REPO is not one), or the digest
// of REPO@sha256:..., or "" for neither.
func imageTag(image string) string {
	if _, digest, ok := strings.Cut(image, "@"); ok {
		return digest
	}
	last := image[strings.LastIndex(image, "/")+1:]
	if _, tag, ok := strings.Cut(last, ":"); ok {
		return tag
	}
	return ""
}

func printVersion(w io.Writer, prog string, r versionReport, clientOnly, read bool) {
	fmt.Fprintf(w, "Client: %s %s\n", prog, r.Client)
	switch {
	case clientOnly || !read:
	case len(r.Drivers) == 0:
		fmt.Fprintf(w, "Driver: no plugin pod found (label %s)\n", PluginPodSelector)
	default:
		for _, d := range r.Drivers {
			v := d.Version
			if v == "" {
				v = "untagged"
			}
			fmt.Fprintf(w, "Driver: %s (image %s, namespace %s, %d plugin pod%s)\n", v, d.Image, d.Namespace, d.Pods, plural(d.Pods))
		}
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
