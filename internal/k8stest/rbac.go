package k8stest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

// RBACFile is the ClusterRole composebox's backend needs, as the documentation gives it.
const RBACFile = "docs/kubernetes-rbac.yaml"

// ClusterRole is the ClusterRole of RBACFile.
func ClusterRole(t testing.TB) *rbacv1.ClusterRole {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, RBACFile))
	if err != nil {
		t.Fatalf("read %s: %v", RBACFile, err)
	}
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s: %v", RBACFile, err)
		}
		if meta.Kind != "ClusterRole" {
			continue
		}
		var role rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict(doc, &role); err != nil {
			t.Fatalf("%s: %v", RBACFile, err)
		}
		return &role
	}
	t.Fatalf("%s holds no ClusterRole", RBACFile)
	return nil
}

// ServiceAccount returns a REST config that acts as a fresh ServiceAccount bound to
// RBACFile's ClusterRole and nothing else, with a token minted through the TokenRequest API:
// a test that runs the backend with it proves the documented privileges suffice. The
// account, its namespace, the ClusterRole copy and the binding are made with the admin
// kubeconfig and removed at the end of the test.
func (e Env) ServiceAccount(t testing.TB) *rest.Config {
	t.Helper()
	admin, cs := e.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := Namespace(t, cs)
	name := ns // unique: the namespace's generated name
	lbl := Labels(t)

	role := ClusterRole(t)
	role.ObjectMeta = metav1.ObjectMeta{Name: name, Labels: lbl}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create cluster role: %v", err)
	}
	t.Cleanup(func() {
		if err := cs.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete cluster role %s: %v", name, err)
		}
	})
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "composebox", Labels: lbl}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create service account: %v", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create cluster role binding: %v", err)
	}
	t.Cleanup(func() {
		if err := cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete cluster role binding %s: %v", name, err)
		}
	})
	secs := int64(2 * 3600)
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("request a token for %s/%s: %v", ns, sa.Name, err)
	}
	cfg := &rest.Config{Host: admin.Host, BearerToken: tok.Status.Token, TLSClientConfig: rest.TLSClientConfig{
		CAFile: admin.TLSClientConfig.CAFile, CAData: admin.TLSClientConfig.CAData, ServerName: admin.TLSClientConfig.ServerName}}
	return cfg
}

// Kubeconfig writes cfg as a kubeconfig file in a temporary directory of the test, for a
// process or a command that takes one.
func Kubeconfig(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	c := clientcmdapi.NewConfig()
	c.Clusters["composebox"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthority: cfg.CAFile, CertificateAuthorityData: cfg.CAData}
	c.AuthInfos["composebox"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	c.Contexts["composebox"] = &clientcmdapi.Context{Cluster: "composebox", AuthInfo: "composebox"}
	c.CurrentContext = "composebox"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*c, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path
}
