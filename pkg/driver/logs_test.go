package driver

import (
	"flag"
	"sync"

	"k8s.io/klog/v2"
)

var (
	klogOnce sync.Once
	klogFS   = flag.NewFlagSet("klog", flag.ContinueOnError)
)

func klogFlags() *flag.FlagSet {
	klogOnce.Do(func() { klog.InitFlags(klogFS) })
	return klogFS
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
