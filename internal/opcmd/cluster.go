// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package opcmd

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

// cluster is how a command reaches the cluster: kubectl's flags
// (--kubeconfig, --context, -n, --as, --request-timeout, ...) bound by
// client-go's clientcmd, the library kubectl's own flags resolve through,
// so that they mean what they mean to kubectl; or a state recorded by
// `diagnose --dump` (--from).
//
// Not k8s.io/cli-runtime's genericclioptions.ConfigFlags, which wraps the
// same clientcmd: that package links kustomize's plugin loader, and with
// it Go's "plugin" package. In a cgo binary that makes the linker mark the
// executable BIND_NOW (and keep every exported method), and gpudra, which
// shares these commands and links go-nvml, whose NVML symbols resolve only
// when called, then dies at start with "symbol lookup error: undefined
// symbol: nvml...". TestKubectlFlags checks the flags against kubectl's.
type cluster struct {
	loading    *clientcmd.ClientConfigLoadingRules
	overrides  clientcmd.ConfigOverrides
	config     clientcmd.ClientConfig
	driverName string
	from       string
	timeout    time.Duration
}

func newCluster() *cluster {
	c := &cluster{loading: clientcmd.NewDefaultClientConfigLoadingRules()}
	c.config = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(c.loading, &c.overrides)
	return c
}

func (c *cluster) addFlags(f *pflag.FlagSet, prog string) {
	f.StringVar(&c.loading.ExplicitPath, clientcmd.RecommendedConfigPathFlag, "", "Path to the kubeconfig file to use for CLI requests.")
	kubectl := clientcmd.RecommendedConfigOverrideFlags("")
	kubectl.ClusterOverrideFlags.APIServer.ShortName = "s" // as kubectl's
	clientcmd.BindOverrideFlags(&c.overrides, f, kubectl)
	f.StringVar(&c.driverName, "driver-name", "gpu.nvidia.com", "the driver's name (chart value driverName)")
	f.StringVar(&c.from, "from", "", "read a state written by '"+prog+" diagnose --dump' instead of a cluster")
	f.DurationVar(&c.timeout, "timeout", 30*time.Second, "time limit for reading the cluster (and each request's, unless --request-timeout says otherwise)")
}

// explicitNamespace is -n as given, "" without it.
func (c *cluster) explicitNamespace() string { return c.overrides.Context.Namespace }

// namespace is the namespace of a NAME without one, as kubectl finds it:
// -n, else the kubeconfig context's namespace, else "default".
func (c *cluster) namespace() string {
	if ns := c.explicitNamespace(); ns != "" {
		return ns
	}
	if c.from == "" {
		if ns, _, err := c.config.Namespace(); err == nil && ns != "" {
			return ns
		}
	}
	return "default"
}

// qualify makes NAME into NAMESPACE/NAME with namespace(); what of
// NAMESPACE/NAME stays, unless -n names another namespace.
func (c *cluster) qualify(what, arg string) (string, error) {
	ns, name, ok := strings.Cut(arg, "/")
	if !ok {
		return c.namespace() + "/" + arg, nil
	}
	if explicit := c.explicitNamespace(); explicit != "" && explicit != ns {
		return "", fmt.Errorf("%s %q is in namespace %s, but -n says %s", what, arg, ns, explicit)
	}
	return ns + "/" + name, nil
}

// client connects as kubectl would with the same flags.
func (c *cluster) client() (kubernetes.Interface, error) {
	cfg, err := c.config.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if t := c.overrides.Timeout; t == "" || t == "0" {
		cfg.Timeout = c.timeout
	}
	// Protobuf: a 500-node fleet's slices decode in less time and memory.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return kubernetes.NewForConfig(cfg)
}

// readSnapshot reads a snapshot `diagnose --dump` wrote (--from).
func readSnapshot(path string) (*clusterview.Snapshot, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	snap := &clusterview.Snapshot{}
	if err := yaml.UnmarshalStrict(data, snap); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return snap, nil
}

// output is -o: the formats a command writes itself (the first is the
// default: the table or the text) and json and yaml, which
// k8s.io/cli-runtime's printers write, as kubectl's -o json and -o yaml do.
type output struct {
	format string
	own    []string
}

// printerFor are the formats printers write.
var printerFor = map[string]func() printers.ResourcePrinter{
	"json": func() printers.ResourcePrinter { return &printers.JSONPrinter{} },
	"yaml": func() printers.ResourcePrinter { return &printers.YAMLPrinter{} },
}

func (o *output) addFlags(f *pflag.FlagSet, own []string, help string) {
	o.own = own
	f.StringVarP(&o.format, "output", "o", own[0], "output format: "+help)
}

// check fails on a format that is neither the command's own nor a printer's.
func (o *output) check() error {
	if slices.Contains(o.own, o.format) || printerFor[o.format] != nil {
		return nil
	}
	var all []string
	for _, f := range o.own {
		if f != "" {
			all = append(all, f)
		}
	}
	return fmt.Errorf("--output %q: use %s, json or yaml", o.format, strings.Join(all, ", "))
}

// print writes report as -o asks, when a printer's format, and says
// whether it did: the report's JSON, handed to the printer as a raw object
// (a report is not an API object).
func (o *output) print(w io.Writer, report any) (bool, error) {
	p := printerFor[o.format]
	if p == nil {
		return false, nil
	}
	data, err := json.Marshal(report)
	if err != nil {
		return true, err
	}
	return true, p().PrintObj(&runtime.Unknown{Raw: data, ContentType: runtime.ContentTypeJSON}, w)
}
