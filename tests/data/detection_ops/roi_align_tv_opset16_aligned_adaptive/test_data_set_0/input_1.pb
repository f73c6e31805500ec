
BroisJ t¦ˆBIišAt¦ˆB*ðvB	A”à—BÛ[A.z˜BææÈBªÁ’BIòB‰™üBöB X§B€H²BýÎBÚ–cBë™˜B˜™’BôÂB+ðBˆnªB
gBÄ6Cƒ?öAÜ›kÀGèhB.BŠ¸AuÏABå­B‘§BÓ!íAÞŠ¤Bÿr’B`nCòzµBÔáö¿«ÄBó)ØA