package apiserver

import (
	"net/http"
	"sort"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apidiscoveryv2beta1 "k8s.io/api/apidiscovery/v2beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// serveDiscovery serves /api, /apis and the group and group-version
// documents. It returns false for other paths.
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request) bool {
	parts := splitPath(r.URL.Path)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch {
	case len(parts) == 1 && parts[0] == "api":
		if s.writeAggregated(w, r, true) {
			return true
		}
		writeRaw(w, http.StatusOK, serializerFor(mediaJSON), &metav1.APIVersions{
			TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
			Versions:                   []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}},
		})
		return true
	case len(parts) == 1 && parts[0] == "apis":
		if s.writeAggregated(w, r, false) {
			return true
		}
		list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
		for _, g := range s.groups {
			if g.Group == "" {
				continue
			}
			list.Groups = append(list.Groups, s.apiGroup(g))
		}
		writeRaw(w, http.StatusOK, serializerFor(mediaJSON), list)
		return true
	case len(parts) == 2 && parts[0] == "apis":
		for _, g := range s.groups {
			if g.Group == parts[1] {
				grp := s.apiGroup(g)
				grp.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
				writeRaw(w, http.StatusOK, serializerFor(mediaJSON), &grp)
				return true
			}
		}
	case len(parts) == 2 && parts[0] == "api" && parts[1] == "v1":
		writeRaw(w, http.StatusOK, serializerFor(mediaJSON), s.resourceList(schema.GroupVersion{Version: "v1"}))
		return true
	case len(parts) == 3 && parts[0] == "apis":
		gv := schema.GroupVersion{Group: parts[1], Version: parts[2]}
		if s.servesGroupVersion(gv) {
			writeRaw(w, http.StatusOK, serializerFor(mediaJSON), s.resourceList(gv))
			return true
		}
	}
	return false
}

func (s *Server) servesGroupVersion(gv schema.GroupVersion) bool {
	for _, g := range s.groups {
		if g.Group == gv.Group {
			for _, v := range g.Versions {
				if v == gv.Version {
					return true
				}
			}
		}
	}
	return false
}

func (s *Server) apiGroup(g groupInfo) metav1.APIGroup {
	grp := metav1.APIGroup{Name: g.Group}
	for _, v := range g.Versions {
		grp.Versions = append(grp.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g.Group + "/" + v, Version: v})
	}
	grp.PreferredVersion = grp.Versions[0]
	return grp
}

// handlersOf returns the resources of a group-version sorted by name.
func (s *Server) handlersOf(gv schema.GroupVersion) []*resourceHandler {
	var out []*resourceHandler
	for _, m := range []map[schema.GroupVersionResource]*resourceHandler{s.resources, s.reviews, s.usage} {
		for gvr, h := range m {
			if gvr.GroupVersion() == gv {
				out = append(out, h)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].r.Resource < out[j].r.Resource })
	return out
}

func (s *Server) resourceList(gv schema.GroupVersion) *metav1.APIResourceList {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	for _, h := range s.handlersOf(gv) {
		r := h.r
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: r.Resource, SingularName: r.Singular, Namespaced: r.Namespaced, Kind: r.Kind,
			Verbs: r.Verbs(), ShortNames: r.ShortNames, Categories: r.Categories,
		})
		for _, sub := range r.Subresources {
			res := metav1.APIResource{Name: r.Resource + "/" + sub.Name, Namespaced: r.Namespaced, Kind: r.Kind, Verbs: sub.Verbs}
			if !sub.GVK.Empty() {
				res.Group, res.Version, res.Kind = sub.GVK.Group, sub.GVK.Version, sub.GVK.Kind
			}
			list.APIResources = append(list.APIResources, res)
		}
	}
	return list
}

// writeAggregated answers with an aggregated discovery document when the
// client's Accept asks for one (v2, or v2beta1 for kubectl ≤ 1.29).
func (s *Server) writeAggregated(w http.ResponseWriter, r *http.Request, core bool) bool {
	for _, a := range parseAccept(r.Header.Get("Accept")) {
		if a.As != "APIGroupDiscoveryList" || a.Group != "apidiscovery.k8s.io" || (a.Type != mediaJSON && a.Type != mediaProtobuf) {
			continue
		}
		var obj runtime.Object
		switch a.Ver {
		case "v2":
			obj = s.aggregatedV2(core)
		case "v2beta1":
			obj = s.aggregatedV2beta1(core)
		default:
			continue
		}
		info := serializerFor(mediaJSON)
		data, err := runtime.Encode(info.Serializer, obj)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return true
		}
		w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v="+a.Ver+";as=APIGroupDiscoveryList")
		w.Header().Set("Vary", "Accept")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(data)
		return true
	}
	return false
}

func (s *Server) aggregatedV2(core bool) *apidiscoveryv2.APIGroupDiscoveryList {
	list := &apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"}}
	for _, g := range s.groups {
		if (g.Group == "") != core {
			continue
		}
		item := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.Group}}
		for _, v := range g.Versions {
			ver := apidiscoveryv2.APIVersionDiscovery{Version: v, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
			for _, h := range s.handlersOf(schema.GroupVersion{Group: g.Group, Version: v}) {
				res := h.r
				scope := apidiscoveryv2.ScopeCluster
				if res.Namespaced {
					scope = apidiscoveryv2.ScopeNamespace
				}
				d := apidiscoveryv2.APIResourceDiscovery{
					Resource: res.Resource, SingularResource: res.Singular, Scope: scope,
					ResponseKind: &metav1.GroupVersionKind{Group: g.Group, Version: v, Kind: res.Kind},
					Verbs:        res.Verbs(), ShortNames: res.ShortNames, Categories: res.Categories,
				}
				for _, sub := range res.Subresources {
					kind := metav1.GroupVersionKind{Group: g.Group, Version: v, Kind: res.Kind}
					if !sub.GVK.Empty() {
						kind = metav1.GroupVersionKind{Group: sub.GVK.Group, Version: sub.GVK.Version, Kind: sub.GVK.Kind}
					}
					d.Subresources = append(d.Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: sub.Name, ResponseKind: &kind, Verbs: sub.Verbs})
				}
				ver.Resources = append(ver.Resources, d)
			}
			item.Versions = append(item.Versions, ver)
		}
		list.Items = append(list.Items, item)
	}
	return list
}

func (s *Server) aggregatedV2beta1(core bool) *apidiscoveryv2beta1.APIGroupDiscoveryList {
	v2 := s.aggregatedV2(core)
	list := &apidiscoveryv2beta1.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2beta1"}}
	for _, g := range v2.Items {
		item := apidiscoveryv2beta1.APIGroupDiscovery{ObjectMeta: g.ObjectMeta}
		for _, v := range g.Versions {
			ver := apidiscoveryv2beta1.APIVersionDiscovery{Version: v.Version, Freshness: apidiscoveryv2beta1.DiscoveryFreshnessCurrent}
			for _, res := range v.Resources {
				d := apidiscoveryv2beta1.APIResourceDiscovery{
					Resource: res.Resource, SingularResource: res.SingularResource, Scope: apidiscoveryv2beta1.ResourceScope(res.Scope),
					ResponseKind: res.ResponseKind, Verbs: res.Verbs, ShortNames: res.ShortNames, Categories: res.Categories,
				}
				for _, sub := range res.Subresources {
					d.Subresources = append(d.Subresources, apidiscoveryv2beta1.APISubresourceDiscovery{Subresource: sub.Subresource, ResponseKind: sub.ResponseKind, Verbs: sub.Verbs})
				}
				ver.Resources = append(ver.Resources, d)
			}
			item.Versions = append(item.Versions, ver)
		}
		list.Items = append(list.Items, item)
	}
	return list
}
