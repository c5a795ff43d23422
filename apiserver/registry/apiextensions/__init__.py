"""apiextensions.k8s.io: CustomResourceDefinitions and the custom resources they define
(upstream's apiextensions-apiserver, folded into the one apiserver as kube-apiserver
folds it): the definitions' strategy, structural schemas, CEL rules, and the serving of
custom resources at run time."""

from apiserver.registry.apiextensions.customresourcedefinitions import STRATEGIES

__all__ = ["STRATEGIES"]
