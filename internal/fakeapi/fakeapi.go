// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package fakeapi is an in-process API server stand-in for tests and the
// offline demo.
package fakeapi

import (
	"fmt"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// NewClientset is client-go's fake clientset plus what the apiserver
// does on create and the fake does not: generating names from
// generateName. The resourceslice controller relies on it as soon as a
// node publishes more than one slice. Used by tests and the offline demo.
func NewClientset(objects ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objects...)
	var n atomic.Int64
	c.PrependReactor("create", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		create, ok := action.(k8stesting.CreateAction)
		if !ok {
			return false, nil, nil
		}
		obj, err := meta.Accessor(create.GetObject())
		if err != nil || obj.GetName() != "" || obj.GetGenerateName() == "" {
			return false, nil, nil
		}
		obj.SetName(fmt.Sprintf("%s%05d", obj.GetGenerateName(), n.Add(1)))
		return false, nil, nil
	})
	return c
}
