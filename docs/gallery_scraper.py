"""The gallery's image scraper (sphinx-gallery, ``docs/conf.py``): the examples write their
figures as PNG files into ``$STSIM_EXAMPLE_OUT`` (they draw on bare matplotlib figures,
which the default scraper, reading pyplot's, does not see); after each code block of an
example, the files it wrote since are copied to the gallery's images and shown in order."""
import os
import shutil

_SHOWN = set()


def written_figures(block, block_vars, gallery_conf):
    """The rST of the PNG files the block wrote into ``$STSIM_EXAMPLE_OUT`` (each shown
    once, in the order written)."""
    from sphinx_gallery.scrapers import figure_rst
    out = os.environ["STSIM_EXAMPLE_OUT"]
    new = sorted((p for p in (os.path.join(out, f) for f in os.listdir(out))
                  if p.endswith(".png") and p not in _SHOWN), key=os.path.getmtime)
    paths = []
    for png, dest in zip(new, block_vars["image_path_iterator"]):
        shutil.copyfile(png, dest)
        _SHOWN.add(png)
        paths.append(dest)
    return figure_rst(paths, gallery_conf["src_dir"])
