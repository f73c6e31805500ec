
BroisJ ”žŸAÌo_?”žŸAÔŠAg+FBí…žAš^GBSì A¤Œ|A\¾BØ$ìAÚXvB³:A—NsAXèòAb‹A….âA»°ñ>ÁæFB¨¾ÄA°Í.B>M‰AVÑ•BsÛ³AâšA`ØA£ˆÓA¥´6B¯¢	Bí@ÕAVh+Bƒ'BMéBùÊÙAª8B:ÁKBÔàNBË”B3«BæyB