// Package scheme holds the runtime.Scheme and codecs of every API type the
// nodeplane API server serves (the k8s.io/api groups plus meta.k8s.io Table
// and PartialObjectMetadata). It is built once at start-up and only read
// afterwards.
package scheme

import (
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Scheme knows every served type. Read-only after package initialisation.
var Scheme = newScheme()

// Codecs builds serializers (JSON, YAML, protobuf) for Scheme.
var Codecs = serializer.NewCodecFactory(Scheme)

// ParameterCodec decodes query parameters into option structs
// (metav1.ListOptions, DeleteOptions, ...).
var ParameterCodec = runtime.NewParameterCodec(Scheme)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(metainternalversion.AddToScheme(s))
	utilruntime.Must(metav1.AddMetaToScheme(s))
	utilruntime.Must(metav1beta1.AddMetaToScheme(s))
	// Options types (ListOptions, DeleteOptions, ...) are decoded from query
	// parameters and bodies under the unversioned v1 group.
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}
