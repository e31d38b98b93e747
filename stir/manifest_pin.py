"""The sha256 of the shipped manifest (``zoo/MANIFEST.sha256``): the trust root, pinned in the package.

``stir.manifest.read`` refuses the shipped manifest unless its bytes hash to this value, so an edited
shipped entry with an edited manifest line is not served. ``python -m stir.zoo.manifest --write`` (and
the ship commands, through ``stir.manifest``) rewrite the manifest and this line together; a test
checks the two agree (tests/zoo/test_manifest_pin.py).
"""
SHIPPED_MANIFEST_SHA256 = "93e08f1f21fe5ba497f8ba96adde42e78735aa43bb0c1925488ee03173646225"
