"""Kubernetes device plugins and xpu-cdi.

Two things live here:

* the helper API for authors of other plugins (:mod:`.response`, re-exported
  below: ``from xpu_cdi import deviceplugin as dp; dp.cdi_devices(...)``),
  standard library only;
* ``xpu-cdi device-plugin``, the kubelet device plugin itself (:mod:`.daemon`
  and the modules it uses), the only part that needs ``grpcio`` and
  ``protobuf``.  Nothing on the hook, wrapper or ``generate`` path imports it.
"""

from .response import (STRATEGIES, allocate_response, allocation_id, annotation, annotation_key, cdi_devices,
                       qualified_names, selection_env)

__all__ = ["STRATEGIES", "allocate_response", "allocation_id", "annotation", "annotation_key", "cdi_devices",
           "qualified_names", "selection_env"]
