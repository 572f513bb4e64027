"""The Go type ``projecthami/mock-device-plugin`` 1.0.1 unmarshals its device config into.

Transcribed (field types and yaml tags only) from Project-HAMi/mock-device-plugin v1.0.1
(017d5185): ``internal/pkg/config/config.go`` ``Config`` and the ``*Config`` structs of
``internal/pkg/api/device/<vendor>/device.go``. ``config.LoadConfig`` decodes the file with
``gopkg.in/yaml.v2`` and ``InitDevices`` exits through ``klog.Fatalf`` on any error.
"""

from __future__ import annotations

from tests.support.go_yaml_v2 import (
    BOOLEAN,
    FLOAT64,
    INT32,
    INT64,
    STRING,
    UINT,
    Ptr,
    Slice,
    Struct,
)

_MIG_TEMPLATE = Struct("device.MigTemplate", {"name": STRING, "memory": INT32, "count": INT32})
_NODE_DEFAULT = Struct(
    "nvidia.NodeDefaultConfig",
    {
        "deviceSplitCount": Ptr(UINT),
        "deviceMemoryScaling": Ptr(FLOAT64),
        "deviceCoreScaling": Ptr(FLOAT64),
        "libCudaLogLevel": Ptr(STRING),
    },
)
NVIDIA = Struct(
    "nvidia.NvidiaConfig",
    {
        "resourceCountName": STRING,
        "resourceMemoryName": STRING,
        "resourceCoreName": STRING,
        "resourceMemoryPercentageName": STRING,
        "resourcePriorityName": STRING,
        "overwriteEnv": BOOLEAN,
        "defaultMemory": INT32,
        "defaultCores": INT32,
        "defaultGPUNum": INT32,
        "memoryFactor": INT32,
        "disableCoreLimit": BOOLEAN,
        "knownMigGeometries": Slice(
            Struct(
                "nvidia.AllowedMigGeometries",
                {
                    "models": Slice(STRING),
                    "allowedGeometries": Slice(Slice(_MIG_TEMPLATE, "device.Geometry")),
                },
            )
        ),
        "gpuCorePolicy": STRING,
        "runtimeClassName": STRING,
    },
    inline=(_NODE_DEFAULT,),
)
_VNPU = Struct(
    "ascend.VNPUConfig",
    {
        "commonWord": STRING,
        "chipName": STRING,
        "resourceName": STRING,
        "resourceMemoryName": STRING,
        "memoryAllocatable": INT64,
        "memoryCapacity": INT64,
        "memoryFactor": INT32,
        "aiCore": INT32,
        "aiCPU": INT32,
        "templates": Slice(
            Struct(
                "ascend.Template",
                {"name": STRING, "memory": INT64, "aiCore": INT32, "aiCPU": INT32},
            )
        ),
    },
)


def _names(go: str, *keys: str) -> Struct:
    return Struct(go, dict.fromkeys(keys, STRING))


CONFIG = Struct(
    "config.Config",
    {
        "nvidia": NVIDIA,
        "metax": Struct(
            "metax.MetaxConfig",
            {
                "resourceCountName": STRING,
                "resourceVCountName": STRING,
                "resourceVMemoryName": STRING,
                "resourceVCoreName": STRING,
                "sgpuTopologyAware": BOOLEAN,
            },
        ),
        "hygon": Struct(
            "hygon.HygonConfig",
            {
                "resourceCountName": STRING,
                "resourceMemoryName": STRING,
                "resourceCoreName": STRING,
                "memoryFactor": INT32,
            },
        ),
        "cambricon": _names(
            "cambricon.CambriconConfig",
            "resourceCountName",
            "resourceMemoryName",
            "resourceCoreName",
        ),
        "mthreads": _names(
            "mthreads.MthreadsConfig", "resourceCountName", "resourceMemoryName", "resourceCoreName"
        ),
        "iluvatars": Slice(
            _names(
                "iluvatar.IluvatarConfig",
                "commonWord",
                "chipName",
                "resourceCountName",
                "resourceMemoryName",
                "resourceCoreName",
            )
        ),
        "enflame": _names(
            "enflame.EnflameConfig",
            "resourceNameGCU",
            "resourceNameVGCU",
            "resourceNameVGCUPercentage",
        ),
        "kunlun": _names(
            "kunlun.KunlunConfig", "resourceCountName", "resourceVCountName", "resourceVMemoryName"
        ),
        "awsneuron": _names("awsneuron.AWSNeuronConfig", "resourceCountName", "resourceCoreName"),
        "amd": _names("amd.AMDConfig", "resourceCountName", "resourceMemoryName"),
        "vnpus": Slice(_VNPU),
    },
)
