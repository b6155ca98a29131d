"""Problems built from model libraries by prefix: ``hf:``, ``timm:``, ``torchvision:``.

Each source module (hf.py, timm_source.py, vision_source.py) implements the protocol in base.py
and is imported only when its prefix is named, so the libraries stay optional extras.
"""
