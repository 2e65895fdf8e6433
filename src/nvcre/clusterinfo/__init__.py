"""``nvcrectl cluster info``: what nvcre finds on a cluster (pure: plain Node dicts in, a model out)."""

from nvcre.clusterinfo.model import ClusterInfo, ClusterInfoError, cluster_info
from nvcre.clusterinfo.render import render_table, to_dict

__all__ = ["ClusterInfo", "ClusterInfoError", "cluster_info", "render_table", "to_dict"]
